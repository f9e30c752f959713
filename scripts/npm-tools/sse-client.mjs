// A server-sent events client on eventsource-parser (a third-party,
// spec-following SSE parser from npm), for the streaming tests and for
// trying a stream by hand. It GETs the URL with the API key, prints the
// response line first, then feeds the body through the parser as it
// arrives and prints one JSON line per event and per comment:
//   {"status":200,"content_type":"text/event-stream; …","request_id":"req_…"}
//   {"comment":"keep-alive","ms":…}
//   {"event":"leg","id":null,"data":{…},"ms":…}
//   {"end":"complete"|"aborted","events":N,"legs":N,"ms":…}
// ms is the time since the response headers arrived. A body that is not
// an event stream (a refusal before the stream opens) is printed as
// {"body":…} and the exit status is 3. Parser errors, data that is not
// JSON and a body that ends inside an event are printed as {"error":…}
// (or an event's "error") and make the exit status 1.
// Usage: node sse-client.mjs URL API_KEY [--abort-after-legs N] [--header 'Name: value']...
//   --abort-after-legs N  disconnect after the Nth leg event (0: right
//                         after the response headers, before any event);
//                         what came with it in the same read is not printed
import { createParser } from "eventsource-parser";

function usage(message) {
  if (message) console.error(message);
  console.error("usage: sse-client.mjs URL API_KEY [--abort-after-legs N] [--header 'Name: value']...");
  process.exit(2);
}

const [url, key, ...rest] = process.argv.slice(2);
if (!url || !key) usage();
const headers = { "x-api-key": key, accept: "text/event-stream" };
let abortAfterLegs = -1;
for (let i = 0; i < rest.length; i++) {
  const flag = rest[i];
  const value = rest[++i];
  if (value === undefined) usage(`${flag} needs a value`);
  if (flag === "--abort-after-legs") {
    abortAfterLegs = Number(value);
    if (!Number.isInteger(abortAfterLegs) || abortAfterLegs < 0) usage("--abort-after-legs takes a whole number");
  } else if (flag === "--header") {
    const colon = value.indexOf(":");
    if (colon <= 0) usage(`--header ${value}: want 'Name: value'`);
    headers[value.slice(0, colon).trim().toLowerCase()] = value.slice(colon + 1).trim();
  } else {
    usage(`unknown option ${flag}`);
  }
}

const print = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const controller = new AbortController();
let response;
try {
  response = await fetch(url, { headers, signal: controller.signal });
} catch (err) {
  print({ error: { name: err?.name, message: String(err?.cause?.message ?? err?.message ?? err) } });
  process.exit(1);
}
const started = performance.now();
const elapsed = () => Math.round(performance.now() - started);
const contentType = response.headers.get("content-type") ?? "";
print({ status: response.status, content_type: contentType, request_id: response.headers.get("x-request-id") });

if (!/^text\/event-stream\s*(;|$)/i.test(contentType)) {
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  print({ body });
  process.exit(3);
}

let failed = false;
let tail = ""; // the body's last characters: it must end with a blank line
let stopped = false; // the leg event to abort after was read: what follows is not
let events = 0;
let legs = 0;
const parser = createParser({
  onEvent(message) {
    if (stopped) return;
    events++;
    const line = { event: message.event ?? null, id: message.id ?? null, ms: elapsed() };
    try {
      line.data = JSON.parse(message.data);
    } catch {
      line.data_text = message.data;
      line.error = "data is not JSON";
      failed = true;
    }
    print(line);
    if (message.event === "leg" && ++legs === abortAfterLegs) stopped = true;
  },
  onComment(comment) {
    if (!stopped) print({ comment, ms: elapsed() });
  },
  onRetry(retry) {
    print({ retry, ms: elapsed() });
  },
  onError(err) {
    failed = true;
    print({ error: { type: err.type, message: err.message, field: err.field, line: err.line } });
  },
});

let outcome = "complete";
if (abortAfterLegs === 0) {
  controller.abort();
  outcome = "aborted";
} else {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      // The last call flushes a character split across reads.
      const text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      tail = (tail + text).slice(-4);
      parser.feed(text);
      if (done) break;
      if (stopped) {
        // Closes the connection: the server sees the caller go.
        controller.abort();
        outcome = "aborted";
        break;
      }
    }
    // The parser drops an event the body ends inside, as the SSE spec
    // says a browser must; a server that ends that way is at fault.
    if (outcome === "complete" && tail !== "" && !/(\r\n\r\n|\n\n|\r\r)$/.test(tail)) {
      failed = true;
      print({ error: { type: "unterminated", message: "the body ends inside an event (no blank line after it)" } });
    }
  } catch (err) {
    failed = true;
    outcome = "error";
    print({ error: { name: err?.name, message: String(err?.message ?? err) } });
  }
}
print({ end: outcome, events, legs, ms: elapsed() });
process.exitCode = failed ? 1 : 0;
