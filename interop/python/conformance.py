#!/usr/bin/env python3
"""The wire-level conformance of a COSI server, from Python's grpcio.

A client of another language than the server's, built on gRPC's C core,
calls a server over its Unix socket: create, get, list, a watch with its
ready marker and bootstrap, and refused calls with their status codes.
`cosi-grpc/tests/c_core_clients.rs` starts the server and runs this script;
by hand:

    python3 conformance.py --socket PATH --proto cosi-grpc/proto --stubs DIR

The stubs are generated from the `.proto` files into DIR with grpcio-tools
each run; none is committed. The channel sends the `:authority` that gRPC's
C core sends on a Unix socket by default from version 1.5x on (the socket's
path, percent-encoded): older versions send `localhost`, so this makes every
version send the form the server must accept.

Each check prints a line; the last line says how many passed. The exit
status is 0 only if all did.
"""

import argparse
import importlib
import os
import sys
import urllib.parse

import grpc
import grpc_tools
from grpc_tools import protoc

NAMESPACE = "default"
TYPE = "PythonThings.test.cosi.dev"
TIMEOUT = 30


def generate(proto_dir, stubs_dir):
    """Generates the Python stubs of the `.proto` files under proto_dir."""
    os.makedirs(stubs_dir, exist_ok=True)
    includes = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    files = [os.path.join("v1alpha1", name) for name in ("resource.proto", "state.proto", "meta.proto")]
    status = protoc.main(
        ["protoc", "-I" + proto_dir, "-I" + includes, "--python_out=" + stubs_dir, "--grpc_python_out=" + stubs_dir]
        + files
    )
    if status != 0:
        raise SystemExit(f"protoc failed ({status}) on {files} in {proto_dir}")
    sys.path.insert(0, stubs_dir)
    return (
        importlib.import_module("v1alpha1.resource_pb2"),
        importlib.import_module("v1alpha1.state_pb2"),
        importlib.import_module("v1alpha1.state_pb2_grpc"),
    )


class Checks:
    """Runs checks, counting those that pass."""

    def __init__(self):
        self.passed = 0

    def check(self, name, condition, detail=""):
        if not condition:
            raise SystemExit(f"FAILED {name}: {detail}")
        self.passed += 1
        print(f"ok {name}")


def refusal(call):
    """The status code of a call that must fail."""
    try:
        call()
    except grpc.RpcError as error:
        return error.code()
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True, help="the server's Unix socket")
    parser.add_argument("--proto", required=True, help="the directory of v1alpha1/*.proto")
    parser.add_argument("--stubs", required=True, help="where to generate the stubs")
    args = parser.parse_args()

    resource_pb2, state_pb2, state_pb2_grpc = generate(args.proto, args.stubs)
    authority = urllib.parse.quote(os.path.abspath(args.socket).lstrip("/"), safe="")
    print(f"grpcio {grpc.__version__}, :authority {authority}")
    channel = grpc.insecure_channel("unix:" + args.socket, options=[("grpc.default_authority", authority)])
    state = state_pb2_grpc.StateStub(channel)
    checks = Checks()

    def resource(id, yaml):
        metadata = resource_pb2.Metadata(namespace=NAMESPACE, type=TYPE, id=id, version="undefined", phase="running")
        return resource_pb2.Resource(metadata=metadata, spec=resource_pb2.Spec(yaml_spec=yaml))

    # Create: the server stores the resource and answers with its first version.
    created = state.Create(state_pb2.CreateRequest(resource=resource("one", "value: 1\n")), timeout=TIMEOUT)
    checks.check("create", created.resource.metadata.version == "1", created)
    state.Create(state_pb2.CreateRequest(resource=resource("two", "value: 2\n")), timeout=TIMEOUT)

    # Get: the spec comes back byte for byte.
    got = state.Get(state_pb2.GetRequest(namespace=NAMESPACE, type=TYPE, id="one"), timeout=TIMEOUT)
    checks.check("get", got.resource.spec.yaml_spec == "value: 1\n", got)

    # List: every resource of the kind, in order of ID.
    listed = [answer.resource.metadata.id for answer in state.List(
        state_pb2.ListRequest(namespace=NAMESPACE, type=TYPE), timeout=TIMEOUT)]
    checks.check("list", listed == ["one", "two"], listed)

    # Watch: the empty "ready" message first, then the bootstrap, then a change.
    options = state_pb2.WatchOptions(bootstrap_contents=True, aggregated=True)
    watch = state.Watch(
        state_pb2.WatchRequest(namespace=NAMESPACE, type=TYPE, options=options, api_version=1), timeout=TIMEOUT)
    ready = next(watch)
    checks.check("watch ready marker", len(ready.event) == 0, ready)
    events = []
    while not any(event.event_type == state_pb2.BOOTSTRAPPED for event in events):
        events.extend(next(watch).event)
    bootstrap = [(event.event_type, event.resource.metadata.id) for event in events]
    expected = [(state_pb2.CREATED, "one"), (state_pb2.CREATED, "two"), (state_pb2.BOOTSTRAPPED, "")]
    checks.check("watch bootstrap", bootstrap == expected, bootstrap)
    state.Create(state_pb2.CreateRequest(resource=resource("three", "value: 3\n")), timeout=TIMEOUT)
    change = next(watch).event
    checks.check("watch event", [(event.event_type, event.resource.metadata.id) for event in change]
                 == [(state_pb2.CREATED, "three")], change)
    watch.cancel()

    # Refused calls, with Go COSI's status codes.
    code = refusal(lambda: state.Create(state_pb2.CreateRequest(resource=resource("one", "x: 1\n")), timeout=TIMEOUT))
    checks.check("create refused: already exists", code == grpc.StatusCode.ALREADY_EXISTS, code)
    code = refusal(lambda: state.Get(state_pb2.GetRequest(namespace=NAMESPACE, type=TYPE, id="none"), timeout=TIMEOUT))
    checks.check("get refused: not found", code == grpc.StatusCode.NOT_FOUND, code)

    channel.close()
    print(f"conformance: {checks.passed} passed, 0 failed")


if __name__ == "__main__":
    main()
