// echo-worker.ts — a TCP echo server on the runtime adapter's sockets, for test/runtime/
// sockets.test.ts to reach from the other runtime: prints {"port": n}, sends back every byte it
// receives, and ends a connection when its peer ends it.
import { runtime } from "../../lib/runtime/index.ts";
import { report } from "./report-channel.ts";

const l = runtime.sockets.listen("127.0.0.1", 0, (c) => ({ data: (chunk) => c.write([chunk]), close: () => c.end() }));
report({ port: l.port, runtime: runtime.name });
