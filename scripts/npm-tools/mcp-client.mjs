// An MCP client on the official TypeScript SDK, for the interoperability
// test and for trying a server by hand. For each call it does what an
// agent does: connect with an API key, list the tools (every page, which
// also makes the SDK cache each tool's output schema and validate results
// against it), then call the tool. Anything the SDK throws is reported with
// that call. It prints what it saw as one JSON line:
//   {"server":…, "tools":[names], "calls":[{"tool","arguments","result"} or {"tool","arguments","error"}]}
// and exits 1 when a call threw.
// Usage: node mcp-client.mjs URL API_KEY TOOL ['JSON_ARGUMENTS']
//        node mcp-client.mjs URL API_KEY '[{"tool":…,"arguments":{…}},…]'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, first, args] = process.argv.slice(2);
if (!url || !key || !first) {
  console.error("usage: mcp-client.mjs URL API_KEY TOOL [JSON_ARGUMENTS] | URL API_KEY JSON_ARRAY_OF_CALLS");
  process.exit(2);
}
const calls = first.trimStart().startsWith("[")
  ? JSON.parse(first)
  : [{ tool: first, arguments: JSON.parse(args || "{}") }];

let server;
let tools = [];
const seen = [];
for (const c of calls) {
  const client = new Client({ name: "meridian-interop", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { "x-api-key": key } },
  });
  try {
    await client.connect(transport);
    server ??= client.getServerVersion();
    const names = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      names.push(...page.tools.map((t) => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    if (tools.length === 0) tools = names;
    const result = await client.callTool({ name: c.tool, arguments: c.arguments ?? {} });
    seen.push({ tool: c.tool, arguments: c.arguments ?? {}, result });
  } catch (err) {
    seen.push({
      tool: c.tool,
      arguments: c.arguments ?? {},
      error: { name: err?.name, code: err?.code, message: String(err?.message ?? err) },
    });
  } finally {
    await client.close().catch(() => {});
  }
}
console.log(JSON.stringify({ server, tools, calls: seen }));
process.exitCode = seen.some((c) => c.error) ? 1 : 0;
