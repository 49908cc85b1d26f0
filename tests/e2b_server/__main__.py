"""``python -m tests.e2b_server [--port 49999]``: serve E2B's protocol until interrupted."""

from __future__ import annotations

import argparse

from tests.e2b_server.server import E2BServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=49999, help="loopback port (49999 is the SDK's debug-mode port)")
    parser.add_argument("--keepalive", type=float, default=1.0, help="seconds of silence before a keepalive line")
    args = parser.parse_args()
    server = E2BServer(args.port, keepalive=args.keepalive)
    hint = "" if server.port == 49999 else f" E2B_SANDBOX_URL={server.url}"
    print(f"E2B protocol server on {server.url}; point the SDK here with E2B_DEBUG=true{hint}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


if __name__ == "__main__":
    main()
