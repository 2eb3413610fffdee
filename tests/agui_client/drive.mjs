// Drives orga's AG-UI endpoint with @ag-ui/client, as a web app does: a thread of two
// messages, then the answer to the approval interrupt the second ends with (approve with
// edited arguments). Prints one JSON line per event: {"run": n, "event": {...}}.
//
//   node drive.mjs URL TOKEN THREAD_ID EDITED_ARGUMENTS_JSON
import { HttpAgent } from "@ag-ui/client";
import { randomUUID } from "node:crypto";

const [url, token, threadId, edited] = process.argv.slice(2);
const agent = new HttpAgent({ url, threadId, headers: { Authorization: `Bearer ${token}` } });
let run = 0;
const print = { onEvent: ({ event }) => console.log(JSON.stringify({ run, event })) };

async function say(text) {
  run += 1;
  agent.messages.push({ id: randomUUID(), role: "user", content: text });
  return agent.runAgent({ runId: randomUUID() }, print);
}

let interrupts = [];
const collect = {
  ...print,
  onRunFinishedEvent: ({ event }) => {
    interrupts = event.outcome?.type === "interrupt" ? event.outcome.interrupts : [];
  },
};

await say("hi");
run += 1;
agent.messages.push({ id: randomUUID(), role: "user", content: "pay bo 500" });
await agent.runAgent({ runId: randomUUID() }, collect);
run += 1;
const resume = interrupts.map((i) => ({
  interruptId: i.id,
  status: "resolved",
  payload: { approved: true, reason: "checked", editedArgs: JSON.parse(edited) },
}));
await agent.runAgent({ runId: randomUUID(), resume }, print);
