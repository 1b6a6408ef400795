"""What is trained and how: configs -> model (build), the LightningModule and its objectives, optimizers and
lr schedules, precision, multi-device strategies."""
