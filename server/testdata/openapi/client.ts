// A TypeScript client of the API as docs/api.md ("Clients") shows it:
// types generated from openapi.json by openapi-typescript, calls through
// openapi-fetch. CI (.ci/run) type-checks it with tsc --strict against the
// types generated from the document, so a change of the document that
// breaks such a client fails there.
import createClient from "openapi-fetch";
import type { components, paths } from "./api";

type Definition = components["schemas"]["Definition"];
type Execution = components["schemas"]["Execution"];

export async function pushAndTrigger(baseUrl: string, token: string): Promise<Execution> {
  const rune = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${token}` } });
  const wf: Definition = {
    id: "hello",
    nodes: [
      { id: "start", type: "trigger", trigger: true },
      { id: "greet", type: "set", parameters: { values: { text: "Hello, {{ $trigger.name }}" } } },
      { id: "call", type: "http", parameters: { url: "https://example.com/{{ $trigger.name }}", method: "POST" }, retry: { max_attempts: 3 } },
    ],
    edges: [{ id: "e1", src: "start", dst: "greet" }, { id: "e2", src: "greet", dst: "call" }],
  };
  const created = await rune.POST("/v1/workflows", { body: wf });
  if (created.error) {
    // Problem details: the code to branch on, the detail to show, the problems with their paths.
    const paths = (created.error.problems ?? []).map((p) => `${p.path ?? ""}: ${p.message}`);
    throw new Error(`${created.error.code}: ${created.error.detail}\n${paths.join("\n")}`);
  }
  const version: number = created.data.version;
  const run = await rune.POST("/v1/workflows/{id}/executions", {
    params: { path: { id: wf.id }, query: { version } },
    headers: { "Idempotency-Key": "greet-ada" },
    body: { name: "Ada" },
  });
  if (run.error) throw new Error(run.error.detail);
  const x = await rune.GET("/v1/executions/{id}", { params: { path: { id: run.data.id } } });
  if (x.error) throw new Error(x.error.detail);
  for (const n of x.data.nodes ?? []) {
    const depth: number = (n.lineage ?? []).length;
    console.log(n.node_id, n.status, depth, n.error?.code);
  }
  return x.data;
}
