# shellcheck shell=bash
# Start and stop the real registries the tests use, as plain processes on 127.0.0.1.
# Source this file; call `services_start` and `services_stop`. Exports:
#   SWITCHMAN_ZK     127.0.0.1:<client port>      (ZooKeeper, standalone)
#   SWITCHMAN_NACOS  127.0.0.1:<http port>        (rnacos; gRPC on http port + 1000)
#   SWITCHMAN_ZK_PID, SWITCHMAN_NACOS_PID, SWITCHMAN_SERVICES_DIR (data dirs and logs)
#   SWITCHMAN_ZK_CLASSPATH, RNACOS_BIN  (for tests that run private servers they can kill)

SWITCHMAN_CACHE="${SWITCHMAN_CACHE:-$HOME/.cache/switchman}"
RNACOS_BIN="${RNACOS_BIN:-$SWITCHMAN_CACHE/rnacos-0.8.8/bin/rnacos}"

_svc_log() { printf '[services] %s\n' "$*" >&2; }

# A TCP port that is free now on 127.0.0.1 (and, with an offset list, ports p+k free too), in
# 11000..17999 with its offsets: below the kernel's ephemeral range (32768-60999, where every
# connect() and bind(0) takes its port, so none can take this one before the server binds it),
# and apart from the bands the tests use (integration-tests/src/ports.rs: fake addresses in
# 18000..19999, the servers the tests start in 21000..32767).
_free_port() {
  python3 - "$@" <<'PY'
import random, socket, sys
offsets = [0] + [int(a) for a in sys.argv[1:]]
for _ in range(200):
    p = random.randint(11000, 17999 - max(offsets))
    ok = True
    for off in offsets:
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p + off))
        except OSError:
            ok = False
        finally:
            s.close()
    if ok:
        print(p)
        sys.exit(0)
sys.exit("no free port found")
PY
}

_zk_ready() {
  python3 - "$1" <<'PY'
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
    s.sendall(b"srvr")
    # The answer may come in several segments; ZooKeeper closes the connection after it.
    data = b""
    while len(data) < 65536:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    sys.exit(0 if b"Mode:" in data else 1)
except OSError:
    sys.exit(1)
PY
}

_nacos_ready() {
  # Naming answers, the gRPC port accepts, and a config publish-and-get round trip works: the
  # last one goes through rnacos's raft store, which a bad start can leave dead while the
  # naming API still answers.
  python3 - "$1" <<'PY'
import socket, sys, urllib.parse, urllib.request
port = int(sys.argv[1])
base = f"http://127.0.0.1:{port}/nacos/v1"
try:
    urllib.request.urlopen(f"{base}/ns/instance/list?serviceName=ready-check", timeout=1).read()
    socket.create_connection(("127.0.0.1", port + 1000), timeout=1).close()
    body = urllib.parse.urlencode({"dataId": "ready-check", "group": "DEFAULT_GROUP", "content": "ok"}).encode()
    urllib.request.urlopen(urllib.request.Request(f"{base}/cs/configs", data=body), timeout=2).read()
    got = urllib.request.urlopen(f"{base}/cs/configs?dataId=ready-check&group=DEFAULT_GROUP", timeout=2).read()
    sys.exit(0 if got.strip() == b"ok" else 1)
except Exception:
    sys.exit(1)
PY
}

_start_rnacos() { # http port
  local np="$1"
  rm -rf "$SWITCHMAN_SERVICES_DIR/nacos-data"
  mkdir -p "$SWITCHMAN_SERVICES_DIR/nacos-data"
  : > "$SWITCHMAN_SERVICES_DIR/empty.env"
  (
    cd "$SWITCHMAN_SERVICES_DIR" || exit 1
    RNACOS_HTTP_PORT="$np" RNACOS_GRPC_PORT="$((np + 1000))" RNACOS_HTTP_CONSOLE_PORT="$((np + 2000))" \
    RNACOS_SDK_HOST=127.0.0.1 RNACOS_CONSOLE_HOST=127.0.0.1 \
    RNACOS_DATA_DIR="$SWITCHMAN_SERVICES_DIR/nacos-data" \
    RNACOS_RAFT_NODE_ADDR="127.0.0.1:$((np + 1000))" \
    RNACOS_ENABLE_METRICS=false \
    RNACOS_NAMING_INSTANCE_METADATA_PERSISTENCE_ENABLE=false \
      exec "$RNACOS_BIN" -e "$SWITCHMAN_SERVICES_DIR/empty.env"
  ) > "$SWITCHMAN_SERVICES_DIR/rnacos.log" 2>&1 &
  SWITCHMAN_NACOS_PID=$!
  export SWITCHMAN_NACOS_PID
}

services_start() {
  SWITCHMAN_SERVICES_DIR="$(mktemp -d /tmp/switchman-services.XXXXXX)"
  export SWITCHMAN_SERVICES_DIR

  # ZooKeeper, standalone, loopback only, no admin server, no JMX.
  local zk_port; zk_port="$(_free_port)"
  mkdir -p "$SWITCHMAN_SERVICES_DIR/zk-data"
  cat > "$SWITCHMAN_SERVICES_DIR/zoo.cfg" <<CFG
tickTime=500
minSessionTimeout=1000
maxSessionTimeout=60000
initLimit=10
syncLimit=5
dataDir=$SWITCHMAN_SERVICES_DIR/zk-data
clientPort=$zk_port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
CFG
  local cp=/usr/share/java/zookeeper.jar
  [ -f /usr/share/java/slf4j-simple.jar ] && cp="$cp:/usr/share/java/slf4j-simple.jar"
  # Tests that stop and restart a server start private ones with these.
  export SWITCHMAN_ZK_CLASSPATH="$cp" RNACOS_BIN
  java -Xmx256m -cp "$cp" org.apache.zookeeper.server.quorum.QuorumPeerMain "$SWITCHMAN_SERVICES_DIR/zoo.cfg" \
    > "$SWITCHMAN_SERVICES_DIR/zookeeper.log" 2>&1 &
  SWITCHMAN_ZK_PID=$!
  export SWITCHMAN_ZK_PID SWITCHMAN_ZK="127.0.0.1:$zk_port"

  # rnacos: HTTP on p, gRPC on p+1000, console on p+2000; everything on 127.0.0.1.
  local np; np="$(_free_port 1000 2000)"
  export SWITCHMAN_NACOS="127.0.0.1:$np"
  local i zk_up=0
  for i in $(seq 1 150); do
    if _zk_ready "$zk_port"; then zk_up=1; break; fi
    if ! kill -0 "$SWITCHMAN_ZK_PID" 2>/dev/null; then break; fi
    sleep 0.2
  done
  if [ "$zk_up" = 0 ]; then
    local state="still running"
    kill -0 "$SWITCHMAN_ZK_PID" 2>/dev/null || state="exited"
    _svc_log "ZooKeeper did not come up on $SWITCHMAN_ZK (pid $SWITCHMAN_ZK_PID $state); log:"
    tail -30 "$SWITCHMAN_SERVICES_DIR/zookeeper.log" >&2
    return 1
  fi
  # rnacos 0.8.8 occasionally panics while starting its raft store; start it afresh then.
  local attempt
  for attempt in 1 2 3; do
    _start_rnacos "$np"
    for i in $(seq 1 150); do
      if _nacos_ready "$np"; then break; fi
      if ! kill -0 "$SWITCHMAN_NACOS_PID" 2>/dev/null; then break; fi
      if grep -q "panicked at" "$SWITCHMAN_SERVICES_DIR/rnacos.log" 2>/dev/null; then break; fi
      sleep 0.2
    done
    if _nacos_ready "$np" && ! grep -q "panicked at" "$SWITCHMAN_SERVICES_DIR/rnacos.log"; then break; fi
    _svc_log "rnacos start $attempt on $SWITCHMAN_NACOS failed; log:"; tail -15 "$SWITCHMAN_SERVICES_DIR/rnacos.log" >&2
    kill -9 "$SWITCHMAN_NACOS_PID" 2>/dev/null || true
    wait "$SWITCHMAN_NACOS_PID" 2>/dev/null || true
    if [ "$attempt" = 3 ]; then return 1; fi
  done
  _svc_log "ZooKeeper on $SWITCHMAN_ZK (pid $SWITCHMAN_ZK_PID), rnacos on $SWITCHMAN_NACOS (pid $SWITCHMAN_NACOS_PID)"
}

services_stop() {
  local pid
  for pid in "${SWITCHMAN_NACOS_PID:-}" "${SWITCHMAN_ZK_PID:-}"; do
    [ -n "$pid" ] || continue
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${SWITCHMAN_NACOS_PID:-}" "${SWITCHMAN_ZK_PID:-}"; do
    [ -n "$pid" ] || continue
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  done
  if [ -n "${SWITCHMAN_SERVICES_DIR:-}" ] && [ -d "$SWITCHMAN_SERVICES_DIR" ]; then
    rm -rf "$SWITCHMAN_SERVICES_DIR"
  fi
}
