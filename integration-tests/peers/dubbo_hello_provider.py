"""A Dubbo Triple provider on the official Python implementation (PyPI apache-dubbo 3.0.0b1).

Started by the Triple integration tests (integration-tests/src/python_peer.rs):

    python dubbo_hello_provider.py --zk 127.0.0.1:2181 --port 50051 --label p1 \
        [--service org.apache.dubbo.samples.HelloWorld]

It registers itself in ZooKeeper the way apache-dubbo does
(/dubbo/{service}/providers/tri%3A%2F%2F127.0.0.1%3A{port}%3Fservice%3D{service}) and serves:

- sayHello(bytes) -> b"hello, {request} from {label}"
- fail(bytes)     -> raises, so the peer answers with a non-OK grpc-status

It prints "READY {port}" on stdout once exported and runs until killed.
"""

import argparse
import sys
import threading

import dubbo
from dubbo.configs import RegistryConfig, ServiceConfig
from dubbo.proxy.handlers import RpcMethodHandler, RpcServiceHandler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--zk", required=True, help="ZooKeeper host:port")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--label", required=True, help="named in every reply")
    parser.add_argument("--service", default="org.apache.dubbo.samples.HelloWorld")
    args = parser.parse_args()

    label = args.label.encode()

    def say_hello(request: bytes) -> bytes:
        return b"hello, " + request + b" from " + label

    def fail(request: bytes) -> bytes:
        raise ValueError("refused: " + request.decode("utf-8", "replace"))

    handler = RpcServiceHandler(
        service_name=args.service,
        method_handlers=[
            RpcMethodHandler.unary(method=say_hello, method_name="sayHello"),
            RpcMethodHandler.unary(method=fail, method_name="fail"),
        ],
    )
    registry = RegistryConfig.from_url(f"zookeeper://{args.zk}")
    bootstrap = dubbo.Dubbo(registry_config=registry)
    server = bootstrap.create_server(
        ServiceConfig(handler, host="127.0.0.1", port=args.port)
    )
    server.start()
    print(f"READY {args.port}", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    sys.exit(main())
