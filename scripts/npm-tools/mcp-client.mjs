// An MCP client on the official TypeScript SDK, for the interoperability
// test: connects to a Meridian /mcp endpoint with an API key, lists the
// tools, calls one and prints what it saw as one JSON line.
// Usage: node client.mjs URL API_KEY TOOL 'JSON_ARGUMENTS'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, tool, args] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { "x-api-key": key } },
});
const client = new Client({ name: "meridian-interop", version: "1.0.0" });
await client.connect(transport);
const names = [];
let cursor;
do {
  const page = await client.listTools(cursor ? { cursor } : {});
  names.push(...page.tools.map((t) => t.name));
  cursor = page.nextCursor;
} while (cursor);
const result = await client.callTool({ name: tool, arguments: JSON.parse(args || "{}") });
console.log(JSON.stringify({ server: client.getServerVersion(), tools: names, result }));
await client.close();
