// A chat page on orga's AG-UI endpoint, with @ag-ui/client.
//
// The page streams a thread's answers, shows a call that waits for a person (a refund) with its
// arguments editable, and sends the decision — approve, approve with edits, or reject with a
// reason — as the answer to the run's interrupt. orga records it as the signed-in user's.
// Each event carries its id (metadata.orga.id); the page keeps the last one, and a page that
// lost its stream (or was reloaded) reconnects after it, missing nothing and seeing nothing
// twice.
import { HttpAgent } from "@ag-ui/client";

const $ = (id) => document.getElementById(id);
const saved = sessionStorage;

// The token the endpoint printed in the page's address (#token=…): kept for this tab, and
// taken out of the address bar.
const given = new URLSearchParams(location.hash.slice(1)).get("token");
if (given) {
  saved.setItem("orga-token", given);
  history.replaceState(null, "", location.pathname);
}
const token = saved.getItem("orga-token");

// AG-UI's connect, as orga answers it: the thread's events after the last one this page has
// (or, without one, its last run from the start).
class OrgaAgent extends HttpAgent {
  connect(input) {
    const after = saved.getItem(`orga-last:${this.threadId}`);
    const orga = after ? { after } : { connect: true };
    return this.run({ ...input, forwardedProps: { ...input.forwardedProps, orga } });
  }
}

function threadId() {
  let id = saved.getItem("orga-thread");
  if (!id) {
    id = crypto.randomUUID();
    saved.setItem("orga-thread", id);
  }
  return id;
}

let agent = newAgent();
const bubbles = new Map(); // message or tool call id → its element
let interrupts = []; // what the last run asks people to decide
const decisions = new Map(); // interrupt id → the answer chosen on its card

function newAgent() {
  return new OrgaAgent({
    url: "agui",
    threadId: threadId(),
    headers: token ? { Authorization: `Bearer ${token}` } : {},
  });
}

function bubble(id, role, text = "") {
  let element = bubbles.get(id);
  if (!element) {
    element = document.createElement("div");
    element.className = `message ${role}`;
    element.dataset.message = id;
    $("messages").append(element);
    bubbles.set(id, element);
  }
  if (text) element.textContent += text;
  return element;
}

const subscriber = {
  onEvent({ event }) {
    const orga = event.metadata?.orga;
    if (orga?.id && !orga.again) saved.setItem(`orga-last:${agent.threadId}`, orga.id);
    switch (event.type) {
      case "TEXT_MESSAGE_START":
        bubble(event.messageId, "assistant");
        break;
      case "TEXT_MESSAGE_CONTENT":
        bubble(event.messageId, "assistant", event.delta);
        break;
      case "TOOL_CALL_START":
        bubble(event.toolCallId, "tool", `${event.toolCallName}(`);
        break;
      case "TOOL_CALL_ARGS":
        bubble(event.toolCallId, "tool", event.delta);
        break;
      case "TOOL_CALL_END":
        bubble(event.toolCallId, "tool", ")");
        break;
      case "TOOL_CALL_RESULT":
        bubble(event.toolCallId, "tool").dataset.result = event.content;
        bubble(event.toolCallId, "tool", ` → ${event.content}`);
        break;
      case "RUN_FINISHED":
        interrupts = event.outcome?.type === "interrupt" ? event.outcome.interrupts : [];
        showApprovals();
        break;
      case "CUSTOM": // a model call asked again takes back what its lost attempt streamed
        if (event.name === "orga.message_withdrawn") {
          bubbles.get(event.value.messageId)?.remove();
          bubbles.delete(event.value.messageId);
        }
        break;
      case "RUN_ERROR":
        $("error").textContent = `${event.code ?? "error"}: ${event.message}`;
        break;
    }
  },
  onStateChanged({ state }) {
    if (state.principal) $("who").textContent = `for ${state.principal}`;
    const left = state.usd_left == null ? "" : ` · $${state.usd_left} left`;
    $("status").textContent = `${state.status} · turn ${state.turn ?? "-"} · ${state.total_tokens} tokens${left}`;
    $("status").dataset.status = state.status;
  },
  onRunFailed({ error }) {
    $("error").textContent = `the stream broke (${error.message}): reconnecting…`;
    setTimeout(reconnect, 1000);
    return { stopPropagation: true };
  },
};

function showApprovals() {
  const section = $("approvals");
  section.replaceChildren();
  decisions.clear();
  for (const interrupt of interrupts) {
    const card = document.createElement("div");
    card.className = "approval";
    card.dataset.interrupt = interrupt.id;
    const call = interrupt.metadata?.orga ?? {};
    const title = document.createElement("h3");
    title.textContent = `${call.tool ?? "a tool call"} waits for you`;
    const why = document.createElement("p");
    why.className = "why";
    why.textContent = interrupt.message ?? "";
    card.append(title, why);
    const fields = {};
    for (const [name, value] of Object.entries(call.arguments ?? {})) {
      const label = document.createElement("label");
      label.textContent = name;
      const input = document.createElement("input");
      input.name = name;
      input.dataset.argument = name;
      input.type = typeof value === "number" ? "number" : "text";
      input.value = typeof value === "string" ? value : JSON.stringify(value);
      label.append(input);
      card.append(label);
      fields[name] = { input, value };
    }
    const reason = document.createElement("input");
    reason.placeholder = "reason (optional; a rejection says why)";
    reason.dataset.field = "reason";
    const approve = document.createElement("button");
    approve.textContent = "Approve";
    approve.dataset.action = "approve";
    const reject = document.createElement("button");
    reject.textContent = "Reject";
    reject.dataset.action = "reject";
    card.append(reason, approve, reject);
    approve.onclick = () => decide(interrupt.id, true, reason.value, edited(fields));
    reject.onclick = () => decide(interrupt.id, false, reason.value || "rejected on the page");
    section.append(card);
  }
}

// The arguments as the person left them, if they changed any (else none: approved as proposed).
function edited(fields) {
  const values = {};
  let changed = false;
  for (const [name, { input, value }] of Object.entries(fields)) {
    const now = typeof value === "number" ? Number(input.value) : input.value;
    const was = typeof value === "string" || typeof value === "number" ? value : JSON.stringify(value);
    values[name] = typeof value === "object" ? JSON.parse(input.value) : now;
    changed ||= now !== was;
  }
  return changed ? values : undefined;
}

async function decide(id, approved, reason, editedArgs) {
  decisions.set(id, { approved, ...(reason ? { reason } : {}), ...(editedArgs ? { editedArgs } : {}) });
  const call = bubbles.get(id); // the call as it will run (the gate checks the edit again)
  if (call && editedArgs) call.textContent = call.textContent.replace(/\(.*\)$/s, `(${JSON.stringify(editedArgs)}) edited`);
  if (call && !approved) call.textContent += " rejected";
  if (decisions.size < interrupts.length) return; // AG-UI: one answer for every interrupt
  const resume = interrupts.map((i) => ({ interruptId: i.id, status: "resolved", payload: decisions.get(i.id) }));
  interrupts = []; // answered: the resume run streams what follows
  $("approvals").replaceChildren();
  await run({ resume });
}

let running = false; // a run of this page streams: the thread takes no other message meanwhile

async function run(parameters) {
  $("error").textContent = "";
  running = true;
  try {
    await agent.runAgent({ runId: crypto.randomUUID(), ...parameters }, subscriber);
  } finally {
    running = false;
  }
}

async function reconnect() {
  $("error").textContent = "";
  await agent.connectAgent({ runId: crypto.randomUUID() }, subscriber);
}

$("ask").onsubmit = async (submitted) => {
  submitted.preventDefault();
  const text = $("text").value.trim();
  if (!text) return;
  // The thread waits for the answer to its waiting call (or streams a turn): a message now
  // would be refused. It stays in the box, and the page says why (it was lost, silently).
  if (interrupts.length || running) {
    $("error").textContent = interrupts.length
      ? "Answer the waiting call first: the thread takes your message after that."
      : "The thread is still answering: send your message once it has.";
    $("error").dataset.held = "true";
    return;
  }
  delete $("error").dataset.held;
  $("text").value = "";
  const id = crypto.randomUUID();
  const sent = bubble(id, "user", text);
  agent.messages.push({ id, role: "user", content: text });
  try {
    await run({});
  } catch (error) {
    sent.dataset.failed = "true";
    sent.textContent += " (not sent)";
    $("error").textContent = `not sent: ${error.message}`;
  }
};

$("new-thread").onclick = () => {
  saved.removeItem("orga-thread");
  agent = newAgent();
  bubbles.clear();
  interrupts = [];
  $("messages").replaceChildren();
  $("approvals").replaceChildren();
  $("status").textContent = "not started";
};

$("who").textContent = token ? "" : "no token: open the link `orga api` printed";
if (saved.getItem(`orga-last:${agent.threadId}`)) reconnect(); // a reloaded page goes on
