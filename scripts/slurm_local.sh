#!/usr/bin/env bash
# A one-node SLURM cluster on this machine (Debian's slurm-wlm + munge), for trying the README's SLURM
# commands and for `pytest -m slurm`. Everything it writes lives in one folder; it installs nothing unless asked.
#
#   scripts/slurm_local.sh up [DIR]     write DIR/slurm.conf (this machine's cores and memory, free ports), start
#                                       munged, slurmctld and slurmd, wait until sinfo shows the node idle
#   scripts/slurm_local.sh down [DIR]   cancel its jobs, stop the three daemons by their pid files
#   scripts/slurm_local.sh env [DIR]    print `export SLURM_CONF=DIR/slurm.conf` (then sinfo, sbatch, srun use it)
#   scripts/slurm_local.sh up --install [DIR]   apt-get install the packages first if they are missing
#
# DIR: the argument, else $SLURM_LOCAL_DIR, else ${TMPDIR:-/tmp}/ffn-zoo-slurm. Needs root (slurmd runs jobs
# as their owner). After `up`:  eval "$(scripts/slurm_local.sh env)"; sbatch ...; srun -n 2 hostname
# Each failure is one line on stderr that says what to do; exit code 2 when SLURM cannot start here.
set -u

PACKAGES="slurm-wlm munge"
DAEMONS="munged slurmctld slurmd"
CLIENTS="munge unmunge sinfo squeue scontrol scancel srun sbatch"

die() { echo "slurm_local: $*" >&2; exit 2; }

cmd=${1:-}; shift || true
install=0
if [ "${1:-}" = "--install" ]; then install=1; shift; fi
DIR=${1:-${SLURM_LOCAL_DIR:-${TMPDIR:-/tmp}/ffn-zoo-slurm}}
case "$DIR" in /*) ;; *) DIR="$PWD/$DIR" ;; esac
CONF="$DIR/slurm.conf"

missing_programs() {
    local p out=""
    for p in $DAEMONS $CLIENTS mungekey; do
        command -v "$p" >/dev/null 2>&1 || [ -x "/usr/sbin/$p" ] || out="$out $p"
    done
    echo "$out"
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

free_port() {  # a TCP port nothing listens on, in 30000-59999 (Lightning's SLURM MASTER_PORT is 15000-24999)
    local port i
    for i in $(seq 1 200); do
        port=$((30000 + RANDOM % 30000))
        [ "$port" = "${1:-}" ] && continue
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "$port"; return 0; fi
    done
    die "no free TCP port found in 30000-59999; free one and run it again"
}

stop_pid() {  # stop_pid NAME PIDFILE: SIGTERM, wait up to 15 s, then SIGKILL
    local name=$1 file=$2 pid i
    [ -s "$file" ] || return 0
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null
        for i in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "slurm_local: $name (pid $pid) ignored SIGTERM for 15 s; killing it" >&2
            kill -KILL "$pid" 2>/dev/null
        fi
    fi
    rm -f "$file"
}

up() {
    [ "$(id -u)" = 0 ] || die "needs root (slurmd starts jobs as their user); run it as root, e.g. sudo $0 up $DIR"
    local missing
    missing=$(missing_programs)
    if [ -n "$missing" ]; then
        if [ "$install" = 1 ]; then
            echo "slurm_local: installing $PACKAGES (missing:$missing)" >&2
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $PACKAGES >"$DIR.apt.log" 2>&1 \
                || die "apt-get install -y $PACKAGES failed (log: $DIR.apt.log); run it yourself, then $0 up"
            missing=$(missing_programs)
        fi
        [ -z "$missing" ] || die "SLURM is not installed (missing:$missing); install it with: apt-get install -y $PACKAGES (or run $0 up --install)"
    fi
    export PATH="$PATH:/usr/sbin:/sbin"
    if alive "$DIR/run/slurmctld.pid"; then
        die "a cluster already runs from $DIR; stop it first: $0 down $DIR"
    fi
    mkdir -p "$DIR"/{munge,state,spool,run,log} || die "cannot create $DIR; pick a writable folder: $0 up DIR"
    chmod 700 "$DIR/munge"

    # munge: its own key, socket, pid and log in DIR/munge, so a system munged (if any) is left alone
    local key="$DIR/munge/munge.key" sock="$DIR/munge/munge.socket"
    if [ ! -s "$key" ]; then
        mungekey --create --keyfile="$key" >/dev/null 2>&1 || dd if=/dev/urandom of="$key" bs=1024 count=1 2>/dev/null \
            || die "cannot write a munge key to $key; check that $DIR is writable"
    fi
    chmod 400 "$key"
    munged --force --key-file="$key" --socket="$sock" --pid-file="$DIR/munge/munged.pid" \
        --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" 2>"$DIR/log/munged.err" \
        || die "munged did not start: $(tail -n1 "$DIR/log/munged.err"); see $DIR/log/munged.log"
    munge --socket="$sock" -n 2>/dev/null | unmunge --socket="$sock" >/dev/null 2>&1 \
        || die "munge does not work with the key $key (munge -n | unmunge fails); see $DIR/log/munged.log"

    # slurm.conf: this machine's real cores and memory (slurmd -C), less 1 GiB for the system
    local host node mem cpus ctld_port slurmd_port
    host=$(hostname -s)
    node=$(slurmd -C 2>/dev/null | head -n1)
    case "$node" in NodeName=*) ;; *) die "slurmd -C did not describe this machine ($node); is slurm-wlm installed whole?" ;; esac
    mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
    cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node")
    mem=$((mem > 2048 ? mem - 1024 : mem))
    node=$(sed "s/RealMemory=[0-9]*/RealMemory=$mem/" <<<"$node")
    ctld_port=$(free_port)
    slurmd_port=$(free_port "$ctld_port")
    cat >"$CONF" <<EOF
# written by scripts/slurm_local.sh up $DIR: a one-node cluster on $host
ClusterName=ffnzoo
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits this long before it runs again (SLURM's default: 120 s)
AuthInfo=socket=$sock,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF="$CONF"
    slurmctld -f "$CONF" 2>"$DIR/log/slurmctld.err" \
        || die "slurmctld did not start: $(tail -n1 "$DIR/log/slurmctld.err"); see $DIR/log/slurmctld.log"
    slurmd -f "$CONF" -N "$host" 2>"$DIR/log/slurmd.err" \
        || die "slurmd did not start: $(tail -n1 "$DIR/log/slurmd.err"); see $DIR/log/slurmd.log"
    local i state=""
    for i in $(seq 1 60); do
        state=$(sinfo -h -N -n "$host" -o %T 2>/dev/null | head -n1)
        [ "$state" = idle ] && break
        sleep 1
    done
    if [ "$state" != idle ]; then
        local why
        why=$(grep -h -i "error" "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" 2>/dev/null | tail -n1)
        down >/dev/null 2>&1
        die "node $host is '${state:-unknown}', not idle, after 60 s (${why:-no error logged}); logs in $DIR/log"
    fi
    echo "slurm_local: up: node $host idle ($cpus CPUs, $mem MB), ports $ctld_port/$slurmd_port; eval \"\$($0 env $DIR)\" to use it"
}

down() {
    export PATH="$PATH:/usr/sbin:/sbin"
    if [ -f "$CONF" ] && alive "$DIR/run/slurmctld.pid"; then
        export SLURM_CONF="$CONF"
        local jobs i
        jobs=$(squeue -h -o %i 2>/dev/null)
        if [ -n "$jobs" ]; then
            scancel $jobs 2>/dev/null
            for i in $(seq 1 60); do  # their steps get SIGTERM, then SIGKILL after KillWait (30 s)
                [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
                sleep 1
            done
        fi
    fi
    stop_pid slurmd "$DIR/run/slurmd.pid"
    stop_pid slurmctld "$DIR/run/slurmctld.pid"
    stop_pid munged "$DIR/munge/munged.pid"
    echo "slurm_local: down ($DIR)"
}

case "$cmd" in
    up) up ;;
    down) down ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: $0 up [--install] [DIR] | down [DIR] | env [DIR]   (DIR: \$SLURM_LOCAL_DIR or ${TMPDIR:-/tmp}/ffn-zoo-slurm)" >&2
       exit 2 ;;
esac
