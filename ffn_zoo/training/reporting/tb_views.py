"""What TensorBoard shows first: the HParams experiment (swept keys as the first columns, the final
metrics beside them) and the Custom Scalars layout (every run's curves on one chart).

Both are written into each run's own events, never into the sweep folder: a folder with events of its
own is a run to TensorBoard (the "." pseudo-run). Takes torch SummaryWriters; no Lightning here.
"""

from __future__ import annotations

from typing import Any, Iterable

import time

from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
from google.protobuf import struct_pb2

# chart title -> ["Multiline", [tag regexes]]; TensorBoard merges identical layouts from every run into one
CUSTOM_SCALARS = {"ffn-zoo: all variants": {
    "val/loss (every run; whole validation split)": ["Multiline", [r"^val/loss$"]],
    "train/loss (every run)": ["Multiline", [r"^train/loss$"]],
    "val/ppl (every run)": ["Multiline", [r"^val/ppl$"]],
    "train/tokens_per_s (every run)": ["Multiline", [r"^train/tokens_per_s$"]],
}}


def write_custom_scalars(writer: Any) -> None:
    writer.add_custom_scalars(CUSTOM_SCALARS)
    writer.flush()


def _hparam_type(value: Any) -> int:
    if isinstance(value, bool):
        return api_pb2.DATA_TYPE_BOOL
    return api_pb2.DATA_TYPE_FLOAT64 if isinstance(value, (int, float)) else api_pb2.DATA_TYPE_STRING


def _summary(tag: str, data: plugin_data_pb2.HParamsPluginData) -> Summary:
    """One hparams-plugin summary (tensorboard.plugins.hparams.summary builds the same, but needs TensorFlow)."""
    return Summary(value=[Summary.Value(tag=tag, metadata=metadata.create_summary_metadata(data),
                                        tensor=metadata.NULL_TENSOR)])


def _value(v: Any) -> struct_pb2.Value:
    if isinstance(v, bool):
        return struct_pb2.Value(bool_value=v)
    return struct_pb2.Value(number_value=v) if isinstance(v, (int, float)) else struct_pb2.Value(string_value=str(v))


def write_hparams(writer: Any, hparams: dict[str, Any], swept: Iterable[str], metric_tags: Iterable[str]) -> None:
    """The run's session (its hyperparameter values) and the experiment that names the columns.

    TensorBoard's hparams backend sorts the columns by (not ``differs``, name), so marking the swept
    keys as differing puts them first; a metric column shows the last value of its scalar tag.
    """
    swept = set(swept)
    experiment = api_pb2.Experiment(
        time_created_secs=time.time(),
        hparam_infos=[api_pb2.HParamInfo(name=k, type=_hparam_type(v), differs=k in swept) for k, v in hparams.items()],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=t)) for t in metric_tags])
    start = plugin_data_pb2.SessionStartInfo(start_time_secs=time.time())
    for k, v in hparams.items():
        start.hparams[k].CopyFrom(_value(v))
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS, end_time_secs=time.time())
    file_writer = writer._get_file_writer()  # torch's SummaryWriter has no public call for a raw summary
    for tag, data in ((metadata.EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(experiment=experiment)),
                      (metadata.SESSION_START_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_start_info=start)),
                      (metadata.SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_end_info=end))):
        file_writer.add_summary(_summary(tag, data))
    writer.flush()
