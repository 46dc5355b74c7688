#!/usr/bin/env bash
# A real single-node Slurm (slurmctld + slurmd + slurmdbd on MariaDB, munge) for
# development and CI.  See slurm/README.md.
#
#   slurm/cluster.sh up       install if needed, configure, start everything, wait for the node
#   slurm/cluster.sh down     stop the daemons this script started (by their pid files)
#   slurm/cluster.sh status   which daemons run, plus sinfo; exit 0 only if all are up
#   slurm/cluster.sh env      shell lines to eval (none: /etc/slurm/slurm.conf is standard)
#
# Runs as root on Debian 12 (Slurm 22.05).  Every state/spool/log/pid file lives
# under $SGSBATCH_SLURM_DIR (default /var/lib/sgsbatch-slurm); the configuration
# goes to /etc/slurm so that plain sbatch/squeue/sacct/scontrol work everywhere.
set -euo pipefail

DIR="${SGSBATCH_SLURM_DIR:-/var/lib/sgsbatch-slurm}"
CLUSTER_NAME="${SGSBATCH_SLURM_CLUSTER:-sgsbatch}"
CONF_DIR=/etc/slurm
SLURM_CONF_FILE="$CONF_DIR/slurm.conf"
SLURMDBD_CONF_FILE="$CONF_DIR/slurmdbd.conf"
MARKER="# Managed by sgsbatch slurm/cluster.sh"
APT_PACKAGES=(slurm-wlm munge slurmdbd mariadb-server)
MYSQL_SOCKET=/run/mysqld/mysqld.sock
DB_NAME=slurm_acct_db
DB_USER=slurm
# Seconds a job may run on after it was picked for preemption (it gets SIGUSR2 at once).
GRACE_TIME="${SGSBATCH_SLURM_GRACE_TIME:-20}"

RUN_DIR="$DIR/run"
LOG_DIR="$DIR/log"
MUNGE_DIR="$DIR/munge"        # owned by munge: pid + log of munged
MARIADB_DIR="$DIR/mariadb"    # owned by mysql: datadir, pid, log
STATE_DIR="$DIR/state"        # slurmctld StateSaveLocation
SPOOL_DIR="$DIR/spool"        # slurmd SlurmdSpoolDir

MUNGED_PID="$MUNGE_DIR/munged.pid"
MARIADBD_PID="$MARIADB_DIR/mariadbd.pid"
SLURMDBD_PID="$RUN_DIR/slurmdbd.pid"
SLURMCTLD_PID="$RUN_DIR/slurmctld.pid"
SLURMD_PID="$RUN_DIR/slurmd.pid"

log() { printf '[cluster.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
    printf '[cluster.sh] ERROR: %s\n' "$*" >&2
    printf '[cluster.sh] logs: %s/*.log %s/*.log %s/mariadb.log\n' "$LOG_DIR" "$MUNGE_DIR" "$MARIADB_DIR" >&2
    exit 1
}

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts system daemons)"
}

# pid_alive PIDFILE NAME: the pid file names a live process whose command is NAME.
pid_alive() {
    local pidfile=$1 name=$2 pid comm
    [[ -s $pidfile ]] || return 1
    pid=$(tr -dc '0-9' <"$pidfile")
    [[ -n $pid ]] || return 1
    [[ -r /proc/$pid/comm ]] || return 1
    comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    [[ $comm == "$name"* ]]
}

# wait_for SECONDS DESCRIPTION COMMAND...: poll COMMAND every 0.5 s until it succeeds.
wait_for() {
    local timeout=$1 what=$2
    shift 2
    local deadline=$((SECONDS + timeout))
    until "$@" >/dev/null 2>&1; do
        if ((SECONDS >= deadline)); then
            die "timed out after ${timeout}s waiting for $what"
        fi
        sleep 0.5
    done
}

# stop_pid PIDFILE NAME: SIGTERM the process of a pid file we wrote, wait, then SIGKILL.
stop_pid() {
    local pidfile=$1 name=$2 pid i
    if ! pid_alive "$pidfile" "$name"; then
        rm -f "$pidfile"
        return 0
    fi
    pid=$(tr -dc '0-9' <"$pidfile")
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 60; i++)); do
        [[ -d /proc/$pid ]] || break
        sleep 0.5
    done
    if [[ -d /proc/$pid ]]; then
        log "$name (pid $pid) did not stop in 30 s; sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        sleep 0.5
    fi
    rm -f "$pidfile"
}

# ---------------------------------------------------------------------------- packages

install_packages() {
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Keep the packages' init scripts from starting daemons during the install:
    # this script starts (and stops) its own, with its own paths.
    local policy=/usr/sbin/policy-rc.d added_policy=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        added_policy=1
    fi
    local rc=0
    # Update the package lists only when they are missing or the install fails on them.
    if ! compgen -G '/var/lib/apt/lists/*_Packages' >/dev/null; then
        apt-get update -q || rc=$?
    fi
    if ((rc == 0)); then
        apt-get install -y -q --no-install-recommends "${missing[@]}" || {
            apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"
        } || rc=$?
    fi
    ((added_policy)) && rm -f "$policy"
    ((rc == 0)) || die "apt-get install ${missing[*]} failed"
}

# ---------------------------------------------------------------------------- munge

munge_works() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }

start_munge() {
    install -d -m 0700 -o munge -g munge "$MUNGE_DIR"
    install -d -m 0755 -o munge -g munge /run/munge
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        install -d -m 0700 -o munge -g munge /etc/munge
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile=/etc/munge/munge.key
        else
            dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
        fi
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 0400 /etc/munge/munge.key
    if pid_alive "$MUNGED_PID" munged; then
        :
    elif munge_works; then
        log "munged already runs (not started by this script; left alone)"
        return 0
    else
        rm -f /run/munge/munge.socket.2.lock 2>/dev/null || true
        log "starting munged"
        runuser -u munge -- /usr/sbin/munged --pid-file="$MUNGED_PID" \
            --log-file="$MUNGE_DIR/munged.log" ||
            die "munged failed to start (see $MUNGE_DIR/munged.log)"
    fi
    wait_for 15 "munge -n | unmunge to succeed" munge_works
}

# ---------------------------------------------------------------------------- mariadb

mysql_root() { mariadb --protocol=socket --socket="$MYSQL_SOCKET" -uroot; }
mariadb_answers() { mariadb-admin --protocol=socket --socket="$MYSQL_SOCKET" -uroot ping; }

start_mariadb() {
    install -d -m 0750 -o mysql -g mysql "$MARIADB_DIR" "$MARIADB_DIR/data"
    install -d -m 0755 -o mysql -g mysql /run/mysqld
    if pid_alive "$MARIADBD_PID" mariadbd; then
        :
    elif mariadb_answers >/dev/null 2>&1; then
        log "a MariaDB server already answers on $MYSQL_SOCKET (not started by this script; using it)"
        return 0
    else
        if [[ ! -d $MARIADB_DIR/data/mysql ]]; then
            log "initialising the MariaDB datadir $MARIADB_DIR/data"
            mariadb-install-db --no-defaults --user=mysql --datadir="$MARIADB_DIR/data" \
                --auth-root-authentication-method=socket --skip-test-db \
                >"$MARIADB_DIR/install-db.log" 2>&1 ||
                die "mariadb-install-db failed (see $MARIADB_DIR/install-db.log)"
        fi
        rm -f "$MYSQL_SOCKET"
        log "starting mariadbd"
        # mariadbd does not daemonize: detach it from this shell.
        setsid /usr/sbin/mariadbd --no-defaults --user=mysql \
            --datadir="$MARIADB_DIR/data" --socket="$MYSQL_SOCKET" \
            --pid-file="$MARIADBD_PID" --log-error="$MARIADB_DIR/mariadb.log" \
            --skip-networking --innodb-buffer-pool-size=512M \
            --innodb-log-file-size=64M --innodb-lock-wait-timeout=900 \
            </dev/null >>"$MARIADB_DIR/mariadb.log" 2>&1 &
    fi
    wait_for 60 "MariaDB to answer on $MYSQL_SOCKET" mariadb_answers
}

db_password() {
    local f="$DIR/db.password"
    if [[ ! -s $f ]]; then
        (umask 077 && head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$f")
    fi
    cat "$f"
}

setup_database() {
    local pw
    pw=$(db_password)
    mysql_root <<SQL || die "creating the slurm database/user in MariaDB failed"
CREATE DATABASE IF NOT EXISTS $DB_NAME;
CREATE USER IF NOT EXISTS '$DB_USER'@'localhost' IDENTIFIED BY '$pw';
ALTER USER '$DB_USER'@'localhost' IDENTIFIED BY '$pw';
GRANT ALL ON $DB_NAME.* TO '$DB_USER'@'localhost';
FLUSH PRIVILEGES;
SQL
}

# ---------------------------------------------------------------------------- config

# write_if_changed FILE MODE: stdin -> FILE when the content differs; returns 0 if written.
write_if_changed() {
    local file=$1 mode=$2 tmp
    tmp=$(mktemp "$file.XXXXXX")
    cat >"$tmp"
    chmod "$mode" "$tmp"
    if [[ -f $file ]] && cmp -s "$tmp" "$file"; then
        rm -f "$tmp"
        return 1
    fi
    if [[ -f $file ]] && ! grep -qF "$MARKER" "$file"; then
        local backup
        backup="$file.before-sgsbatch.$(date +%Y%m%d%H%M%S)"
        log "saving the existing $file (not written by this script) as $backup"
        cp -p "$file" "$backup"
    fi
    mv -f "$tmp" "$file"
    return 0
}

real_memory_mb() {
    # A bit less than the memory that is free now, rounded down to whole GiB so
    # that re-running `up` keeps the same value; never more than 90% of the total.
    local total avail mem
    total=$(awk '/^MemTotal:/ {print int($2/1024)}' /proc/meminfo)
    avail=$(awk '/^MemAvailable:/ {print int($2/1024)}' /proc/meminfo)
    mem=$((avail - 1024))
    ((mem > total * 9 / 10)) && mem=$((total * 9 / 10))
    mem=$((mem / 1024 * 1024))
    ((mem < 1024)) && mem=1024
    echo "${SGSBATCH_SLURM_MEM_MB:-$mem}"
}

# Sets CONFIG_CHANGED=1 when slurm.conf changed, DBD_CONFIG_CHANGED=1 for slurmdbd.conf.
write_configs() {
    local host cpus mem pw
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(real_memory_mb)
    pw=$(db_password)
    install -d -m 0755 "$CONF_DIR"
    CONFIG_CHANGED=0
    if write_if_changed "$SLURM_CONF_FILE" 0644 <<EOF; then CONFIG_CHANGED=1; fi
$MARKER -- edits are overwritten by \`slurm/cluster.sh up\`.
# Single-node cluster for sgsbatch development and CI; state under $DIR.
ClusterName=$CLUSTER_NAME
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Requeued jobs may start again after cred_expire (default 120 s) + 1 s.
AuthInfo=cred_expire=5
MpiDefault=none
SwitchType=switch/none
# Container-like machines have no cgroup control.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
JobRequeue=1

StateSaveLocation=$STATE_DIR
SlurmdSpoolDir=$SPOOL_DIR/slurmd
SlurmctldPidFile=$SLURMCTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info

# Timers: fast kills, finished jobs leave squeue after a minute (sacct keeps them).
KillWait=10
MinJobAge=60
InactiveLimit=0
Waittime=0
MessageTimeout=10
SlurmdTimeout=120
SlurmctldTimeout=60

# Scheduling: start dependent jobs as soon as their predecessor ends.
SchedulerType=sched/backfill
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0,sched_interval=5,bf_interval=2,default_queue_depth=1000
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MaxArraySize=100001
MaxJobCount=200000

# Preemption: jobs in 'urgent' requeue jobs in 'batch'.  The victim first gets
# its --signal (e.g. SIGUSR2, which submitit handles) and GraceTime seconds to
# checkpoint, then SIGTERM, and SIGKILL KillWait seconds later.
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal

AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
JobCompType=jobcomp/none
MailProg=/bin/true

NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=batch Nodes=$host Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=$GRACE_TIME DefMemPerCPU=$((mem / cpus))
PartitionName=urgent Nodes=$host MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF DefMemPerCPU=$((mem / cpus))
EOF
    DBD_CONFIG_CHANGED=0
    if write_if_changed "$SLURMDBD_CONF_FILE" 0600 <<EOF; then DBD_CONFIG_CHANGED=1; fi
$MARKER -- edits are overwritten by \`slurm/cluster.sh up\`.
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=$DB_USER
StoragePass=$pw
StorageLoc=$DB_NAME
PidFile=$SLURMDBD_PID
LogFile=$LOG_DIR/slurmdbd.log
DebugLevel=info
EOF
    chown root:root "$SLURMDBD_CONF_FILE"
    chmod 0600 "$SLURMDBD_CONF_FILE"
}

# ---------------------------------------------------------------------------- slurm daemons

start_slurmdbd() {
    if pid_alive "$SLURMDBD_PID" slurmdbd && ((DBD_CONFIG_CHANGED)); then
        log "slurmdbd.conf changed: restarting slurmdbd"
        stop_pid "$SLURMDBD_PID" slurmdbd
    fi
    if ! pid_alive "$SLURMDBD_PID" slurmdbd; then
        log "starting slurmdbd"
        /usr/sbin/slurmdbd || die "slurmdbd failed to start (see $LOG_DIR/slurmdbd.log)"
    fi
    wait_for 60 "slurmdbd to answer (sacctmgr show cluster)" sacctmgr -n show cluster
    if ! sacctmgr -n -P show cluster format=Cluster | grep -qx "$CLUSTER_NAME"; then
        log "registering cluster $CLUSTER_NAME in slurmdbd"
        sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null || die "sacctmgr add cluster $CLUSTER_NAME failed"
    fi
}

start_slurmctld() {
    if pid_alive "$SLURMCTLD_PID" slurmctld; then
        if ((CONFIG_CHANGED)); then
            log "slurm.conf changed: restarting slurmctld"
            stop_pid "$SLURMCTLD_PID" slurmctld
        fi
    fi
    if ! pid_alive "$SLURMCTLD_PID" slurmctld; then
        log "starting slurmctld"
        /usr/sbin/slurmctld || die "slurmctld failed to start (see $LOG_DIR/slurmctld.log)"
    fi
    wait_for 60 "slurmctld to answer (scontrol ping)" bash -c 'scontrol ping | grep -q "is UP"'
}

start_slurmd() {
    if pid_alive "$SLURMD_PID" slurmd && ((CONFIG_CHANGED)); then
        log "slurm.conf changed: restarting slurmd"
        stop_pid "$SLURMD_PID" slurmd
    fi
    if ! pid_alive "$SLURMD_PID" slurmd; then
        log "starting slurmd"
        /usr/sbin/slurmd || die "slurmd failed to start (see $LOG_DIR/slurmd.log)"
    fi
}

node_state() { sinfo -h -N -n "$(hostname -s)" -o '%T' 2>/dev/null | head -n1; }

node_usable() {
    local s
    s=$(node_state)
    # idle, or already busy with jobs: both mean the node registered and works.
    [[ $s == idle || $s == mixed || $s == allocated || $s == completing ]]
}

wait_node_idle() {
    local deadline=$((SECONDS + 90)) s
    until node_usable; do
        s=$(node_state)
        # A node left down/drained by an earlier, unclean stop: put it back.
        if [[ $s == down* || $s == drain* ]]; then
            scontrol update nodename="$(hostname -s)" state=resume >/dev/null 2>&1 || true
        fi
        if ((SECONDS >= deadline)); then
            sinfo -N -l >&2 || true
            die "node $(hostname -s) is not idle after 90 s (state '${s:-?}'); see $LOG_DIR/slurmd.log and $LOG_DIR/slurmctld.log"
        fi
        sleep 0.5
    done
}

# ---------------------------------------------------------------------------- commands

cmd_up() {
    need_root
    local t0=$SECONDS
    install_packages
    install -d -m 0755 "$DIR" "$RUN_DIR" "$LOG_DIR" "$STATE_DIR" "$SPOOL_DIR" "$SPOOL_DIR/slurmd"
    start_munge
    start_mariadb
    setup_database
    write_configs
    start_slurmdbd
    start_slurmctld
    start_slurmd
    wait_node_idle
    log "cluster '$CLUSTER_NAME' is up in $((SECONDS - t0)) s: partitions $(sinfo -h -o '%P' | paste -sd, -), node $(hostname -s) $(node_state)"
}

cmd_down() {
    need_root
    # Reverse start order.  Only processes whose pid file this script wrote.
    stop_pid "$SLURMD_PID" slurmd
    stop_pid "$SLURMCTLD_PID" slurmctld
    stop_pid "$SLURMDBD_PID" slurmdbd
    stop_pid "$MARIADBD_PID" mariadbd
    stop_pid "$MUNGED_PID" munged
    log "down"
}

cmd_status() {
    local ok=0 name pidfile
    for name in munged mariadbd slurmdbd slurmctld slurmd; do
        case $name in
            munged) pidfile=$MUNGED_PID ;;
            mariadbd) pidfile=$MARIADBD_PID ;;
            slurmdbd) pidfile=$SLURMDBD_PID ;;
            slurmctld) pidfile=$SLURMCTLD_PID ;;
            slurmd) pidfile=$SLURMD_PID ;;
        esac
        if pid_alive "$pidfile" "$name"; then
            printf '%-10s running (pid %s)\n' "$name" "$(tr -dc '0-9' <"$pidfile")"
        elif [[ $name == munged ]] && munge_works; then
            printf '%-10s running (not started by cluster.sh)\n' "$name"
        elif [[ $name == mariadbd ]] && mariadb_answers >/dev/null 2>&1; then
            printf '%-10s running (not started by cluster.sh)\n' "$name"
        else
            printf '%-10s NOT running\n' "$name"
            ok=1
        fi
    done
    if sinfo 2>/dev/null; then
        node_usable || ok=1
    else
        echo "sinfo: no answer from slurmctld"
        ok=1
    fi
    return "$ok"
}

cmd_env() {
    # slurm.conf is at the standard /etc/slurm/slurm.conf: nothing to export.
    if [[ $SLURM_CONF_FILE != /etc/slurm/slurm.conf ]]; then
        echo "export SLURM_CONF=$SLURM_CONF_FILE"
    fi
}

usage() {
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
}

case "${1:-}" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    env) cmd_env ;;
    -h | --help | help) usage ;;
    *)
        usage >&2
        exit 2
        ;;
esac
