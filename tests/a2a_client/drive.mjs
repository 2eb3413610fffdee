// @a2a-js/sdk as another agent uses it: read orga's agent card, send one message (streamed with
// --stream, each state printed as a JSON line as it comes: {"state": …}) and print one JSON
// line at the end: the task states seen in order, the final state, the text of its
// artifacts, its contextId. The caller's token comes from A2A_TOKEN.
//
//   A2A_TOKEN=… node drive.mjs <baseUrl> [--stream] [--context <contextId>] <text>
import { randomUUID } from 'node:crypto';
import { Role, TaskState } from '@a2a-js/sdk';
import {
  ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, createAuthenticatingFetchWithRetry,
} from '@a2a-js/sdk/client';

const argv = process.argv.slice(2);
const stream = argv.includes('--stream');
const at = argv.indexOf('--context');
const contextId = at >= 0 ? argv[at + 1] : '';
const given = (a, i) => a !== '--stream' && (at < 0 || (i !== at && i !== at + 1));
const [baseUrl, ...words] = argv.filter(given);
const token = process.env.A2A_TOKEN;

const name = (state) => TaskState[state] ?? String(state);
const textOf = (parts = []) =>
  parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value).join('');

async function main() {
  const authenticated = createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => (token ? { Authorization: `Bearer ${token}` } : {}),
    shouldRetryWithHeaders: async () => undefined, // one static token: never retried
  });
  const card = await new DefaultAgentCardResolver().resolve(baseUrl);
  const factory = new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl: authenticated })],
  });
  const client = await factory.createFromAgentCard(card);
  const request = {
    tenant: '',
    message: {
      messageId: randomUUID(), contextId, taskId: '', role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text', value: words.join(' ') }, filename: '', mediaType: 'text/plain' }],
      extensions: [], referenceTaskIds: [],
    },
    configuration: { acceptedOutputModes: ['text/plain', 'application/json'] },
  };
  const states = [];
  let task;
  if (!stream) {
    task = await client.sendMessage(request);
    states.push(name(task.status?.state));
  } else {
    for await (const event of client.sendMessageStream(request)) {
      const { $case, value } = event.payload ?? {};
      if ($case === 'task') {
        task = { ...value, artifacts: [...(value.artifacts ?? [])] };
        states.push(name(value.status?.state));
      } else if ($case === 'statusUpdate') {
        task.status = value.status;
        states.push(name(value.status?.state));
        console.log(JSON.stringify({ state: name(value.status?.state) }));
      } else if ($case === 'artifactUpdate') {
        task.artifacts.push(value.artifact);
      }
    }
  }
  const text = task.artifacts.map((a) => textOf(a.parts)).join('');
  console.log(JSON.stringify({ states, state: name(task.status?.state), text, contextId: task.contextId }));
}

main().catch((error) => {
  console.log(JSON.stringify({ error: error?.message ?? String(error) }));
  process.exit(1);
});
