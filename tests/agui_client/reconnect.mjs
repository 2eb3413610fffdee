// A web app whose stream breaks mid-answer, and that reconnects with its last event id.
//
//   node reconnect.mjs URL TOKEN THREAD_ID
//
// Sends one message and prints each event as {"part": 1, "event": …}. When the stream
// breaks (the endpoint went away), prints {"cut": LAST_EVENT_ID}, then waits for a line on
// stdin (the test restarts the endpoint and the worker meanwhile). Then it reconnects —
// connectAgent, with the id in forwardedProps.orga.after — and prints {"part": 2, "event": …}
// until that run ends, then {"done": true}.
import { HttpAgent } from "@ag-ui/client";
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";

class ReconnectingAgent extends HttpAgent {
  after = undefined;

  // AG-UI's connect: follow the thread's run from where this client stopped.
  connect(input) {
    const orga = { after: this.after };
    return this.run({ ...input, forwardedProps: { ...input.forwardedProps, orga } });
  }
}

// Node's fetch (undici) reports the broken body once more, outside the stream the client
// already saw fail: that one is expected, any other error is not.
process.on("uncaughtException", (error) => {
  if (!(error instanceof TypeError && error.message === "terminated")) throw error;
});

const [url, token, threadId] = process.argv.slice(2);
const agent = new ReconnectingAgent({
  url,
  threadId,
  headers: { Authorization: `Bearer ${token}` },
});
let part = 1;
let last;
const print = {
  onEvent: ({ event }) => {
    const orga = event.metadata?.orga;
    if (orga?.id && !orga.again) last = orga.id; // an event sent again is not a new one
    console.log(JSON.stringify({ part, event }));
  },
  onRunFailed: ({ error }) => {
    console.log(JSON.stringify({ part, failed: String(error) }));
    return { stopPropagation: true }; // the broken stream is expected (the test checks when)
  },
};

agent.messages.push({ id: randomUUID(), role: "user", content: "tell me a story" });
await agent.runAgent({ runId: randomUUID() }, print).catch(() => undefined);
console.log(JSON.stringify({ cut: last }));

const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));
lines.close();
part = 2;
agent.after = last;
await agent.connectAgent({ runId: randomUUID() }, print);
console.log(JSON.stringify({ done: true }));
