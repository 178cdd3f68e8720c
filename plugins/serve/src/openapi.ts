// The API, version 1, as an OpenAPI 3.1 document: data, so it is served as is
// (`GET /v1/openapi.json`) and a test holds it to the routes api.ts serves and
// to the answers a real server gives. Schemas are JSON Schema 2020-12, the
// dialect of OpenAPI 3.1. The README says why each route answers as it does;
// the descriptions here say what a client needs to call it.

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }
type Schema = { [key: string]: Json }

const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` })
const string: Schema = { type: 'string' }
const seq: Schema = { type: 'integer', minimum: 0 }
const nullable = (schema: Schema): Schema => ({ anyOf: [schema, { type: 'null' }] })
const object = (properties: Record<string, Schema>, required: string[], extra = false): Schema => ({
  type: 'object',
  properties,
  required,
  additionalProperties: extra,
})
const json = (schema: Schema) => ({ 'application/json': { schema } })

const RETRY_AFTER = { 'Retry-After': { $ref: '#/components/headers/RetryAfter' } }

/** An error answer: the shared error body, with `Retry-After` when a retry can succeed. */
const failure = (description: string, retry = false) => ({ description, content: json(ref('Error')), ...(retry && { headers: RETRY_AFTER }) })

/** The error answers every route with a token shares. */
const COMMON = {
  '401': { $ref: '#/components/responses/Unauthorized' },
  '500': failure('`INTERNAL`, or `SESSION_CORRUPT` (a session whose stored log is damaged: do not retry; the message names `loom sessions verify ID`)'),
}
const STORE = failure(
  '`STORE_UNAVAILABLE` (nothing was done: retry with the same Idempotency-Key), `DRAINING` (retry on another host), `TOO_MANY_CONNECTIONS`, `SESSION_FORMAT_UNSUPPORTED`',
  true,
)
const HELD = failure(
  '`SESSION_LEASE_HELD` (another live host runs the session: `holder` names it, `holder.command` has its URL) or `SESSION_LEASE_LOST`; nothing was done: retry',
  true,
)
const INVALID = failure('`INVALID_JSON`, `INVALID_REQUEST` (the culprit in `field`), `MODEL_NOT_ALLOWED` (with `allowed`)')
const NO_SESSION = failure("`SESSION_NOT_FOUND`: no such session in this server's project")
const TOO_LARGE = failure("`PAYLOAD_TOO_LARGE`: the body is larger than the server's `maxBodyBytes`")
const MISMATCH = failure('`IDEMPOTENCY_MISMATCH`: this Idempotency-Key was used with another body')

const param = (name: string) => ({ $ref: `#/components/parameters/${name}` })

export const OPENAPI: Readonly<Schema> = {
  openapi: '3.1.0',
  info: {
    title: 'Loom API',
    version: '1',
    summary: 'Sessions of a Loom deployment over HTTP: create, continue, cancel, read and follow them, and answer their approvals.',
    description:
      'Every write is answered 2xx only once it is durably in the session store; any other answer means it was not carried out, so a failed write may always be retried (with the same `Idempotency-Key` when the answer may have been lost).',
    license: { name: 'MIT', identifier: 'MIT' },
  },
  security: [{ bearer: [] }],
  paths: {
    '/healthz': {
      get: {
        operationId: 'health',
        summary: 'Liveness: the process answers (`draining` is still 200)',
        security: [],
        responses: { '200': { description: 'Alive', content: json(ref('Health')) } },
      },
    },
    '/readyz': {
      get: {
        operationId: 'ready',
        summary: 'Readiness: this host can take work (not draining, the store answers)',
        security: [],
        responses: {
          '200': { description: 'Ready', content: json(ref('Ready')) },
          '503': { description: 'Draining, or the store cannot be reached', headers: RETRY_AFTER, content: json(ref('Ready')) },
        },
      },
    },
    '/v1/openapi.json': {
      get: {
        operationId: 'openapi',
        summary: 'This document',
        responses: { '200': { description: 'The OpenAPI 3.1 document of API v1', content: json({ type: 'object' }) }, ...COMMON },
      },
    },
    '/v1/sessions': {
      post: {
        operationId: 'createSession',
        summary: 'Create a session with a task; its first turn runs',
        parameters: [param('IdempotencyKey')],
        requestBody: { required: true, content: json(ref('CreateSession')) },
        responses: {
          '201': {
            description: "The task is durably in the new session's log",
            headers: { Location: { description: "The session's URL path", schema: string } },
            content: json(ref('Created')),
          },
          '400': INVALID,
          '413': TOO_LARGE,
          '422': MISMATCH,
          '503': STORE,
          ...COMMON,
        },
      },
      get: {
        operationId: 'listSessions',
        summary: "The sessions of this server's project, oldest first",
        responses: { '200': { description: 'The sessions', content: json(ref('SessionList')) }, '503': STORE, ...COMMON },
      },
    },
    '/v1/sessions/{id}': {
      get: {
        operationId: 'getSession',
        summary: "A session's summary and its durable events from `from` on",
        parameters: [param('SessionId'), param('From')],
        responses: { '200': { description: 'The session', content: json(ref('SessionRead')) }, '400': INVALID, '404': NO_SESSION, '503': STORE, ...COMMON },
      },
    },
    '/v1/sessions/{id}/messages': {
      post: {
        operationId: 'sendMessage',
        summary: 'Send a followup, steering or context to a session',
        parameters: [param('SessionId'), param('IdempotencyKey')],
        requestBody: { required: true, content: json(ref('SendMessage')) },
        responses: {
          '202': { description: "The message is durably in the session's log", content: json(ref('Delivered')) },
          '400': INVALID,
          '404': NO_SESSION,
          '409': HELD,
          '413': TOO_LARGE,
          '422': MISMATCH,
          '503': STORE,
          ...COMMON,
        },
      },
    },
    '/v1/sessions/{id}/cancel': {
      post: {
        operationId: 'cancel',
        summary: 'Cancel the running turn (closed `aborted`, cause `user`)',
        parameters: [param('SessionId'), param('IdempotencyKey')],
        requestBody: { required: false, content: json({ type: 'object' }) },
        responses: {
          '200': { description: 'The turn is closed in the log; `cancelled: false` when nothing ran', content: json(ref('Cancelled')) },
          '400': INVALID,
          '404': NO_SESSION,
          '409': HELD,
          '413': TOO_LARGE,
          '503': STORE,
          ...COMMON,
        },
      },
    },
    '/v1/sessions/{id}/events': {
      get: {
        operationId: 'events',
        summary: 'Follow a session: its durable events as Server-Sent Events, resumable by seq',
        description:
          'One message per session event: `id:` its seq, `data:` the event (`SessionEvent`) as JSON on one line, no `event:` field; `: heartbeat` comments keep the connection open. Starts after `Last-Event-ID`, else after `after`, else at seq 0. Seqs are dense: reconnecting with the last id processed gets every later event exactly once, from any host. The stream ends when the server drains.',
        parameters: [param('SessionId'), param('LastEventId'), param('After')],
        responses: {
          '200': { description: 'The event stream', content: { 'text/event-stream': { schema: string } } },
          '400': INVALID,
          '404': NO_SESSION,
          '503': STORE,
          ...COMMON,
        },
      },
    },
    '/v1/sessions/{id}/approvals/{callId}': {
      post: {
        operationId: 'answerApproval',
        summary: 'Answer the question of a tool call (`approval/requested`), on a server run with `--approve api`',
        parameters: [param('SessionId'), param('CallId'), param('IdempotencyKey')],
        requestBody: { required: true, content: json(ref('AnswerApproval')) },
        responses: {
          '200': { description: 'The answer is durably in the log and the call goes on', content: json(ref('ApprovalAnswered')) },
          '400': INVALID,
          '404': failure(
            '`APPROVAL_NOT_FOUND` (no open question for that call: answered, past its deadline, cancelled, never asked, or the server does not take approvals over the API) or `SESSION_NOT_FOUND`',
          ),
          '409': HELD,
          '413': TOO_LARGE,
          '503': STORE,
          ...COMMON,
        },
      },
    },
  },
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: "The server's token (`LOOM_SERVE_TOKEN` or `--token-file`)" } },
    headers: {
      RetryAfter: { description: 'Seconds to wait before retrying', schema: { type: 'integer', minimum: 0 } },
    },
    parameters: {
      SessionId: { name: 'id', in: 'path', required: true, schema: string },
      CallId: { name: 'callId', in: 'path', required: true, description: 'The `callId` of the `approval/requested` event', schema: string },
      IdempotencyKey: {
        name: 'Idempotency-Key',
        in: 'header',
        description:
          'A retry with the same key and body gets the first answer and does nothing more (for a day by default); another body is 422. A UUID per logical request.',
        schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
      },
      LastEventId: { name: 'Last-Event-ID', in: 'header', description: 'Start after this seq (-1: from the first)', schema: { type: 'integer', minimum: -1 } },
      After: { name: 'after', in: 'query', description: 'Start after this seq, when no Last-Event-ID is sent', schema: { type: 'integer', minimum: -1 } },
      From: { name: 'from', in: 'query', description: 'The first seq of the events returned (default 0)', schema: seq },
    },
    responses: {
      Unauthorized: {
        description: '`UNAUTHORIZED`: no valid bearer token',
        headers: { 'WWW-Authenticate': { schema: string } },
        content: json(ref('Error')),
      },
    },
    schemas: {
      Error: object(
        {
          error: object(
            {
              code: { type: 'string', description: 'Stable: what a client branches on' },
              message: string,
              field: { type: 'string', description: 'The request field or header at fault' },
              holder: ref('LeaseHolder'),
              allowed: { type: 'array', items: string, description: 'The routes (`provider/model`) a request may name' },
            },
            ['code', 'message'],
            true,
          ),
        },
        ['error'],
      ),
      LeaseHolder: object({ pid: { type: 'integer' }, host: string, since: { type: 'number' }, command: string }, ['pid', 'host', 'since'], true),
      SessionEvent: object({ type: string, seq, time: { type: 'number', description: 'ms since the epoch' }, data: {} }, ['type', 'seq', 'time'], true),
      SessionStatus: { enum: ['running', 'idle'] },
      CreateSession: object({ task: { type: 'string', minLength: 1 }, provider: string, model: string }, ['task']),
      Created: object(
        {
          id: string,
          provider: nullable(string),
          model: nullable(string),
          status: { const: 'running' },
          events: { type: 'string', description: 'The path of its event stream' },
        },
        ['id', 'provider', 'model', 'status', 'events'],
      ),
      MessageMode: { enum: ['followup', 'steer', 'inject'] },
      SendMessage: object({ text: { type: 'string', minLength: 1 }, mode: ref('MessageMode') }, ['text']),
      Delivered: object(
        {
          id: string,
          seq: { ...seq, description: 'The seq of the event that put the message in the inbox' },
          status: ref('SessionStatus'),
          mode: ref('MessageMode'),
        },
        ['id', 'seq', 'status', 'mode'],
      ),
      Cancelled: object({ id: string, cancelled: { type: 'boolean' } }, ['id', 'cancelled']),
      SessionList: object(
        {
          sessions: {
            type: 'array',
            items: object(
              { id: string, createdAt: { type: 'number' }, cwd: nullable(string), here: { type: 'boolean' }, status: nullable(ref('SessionStatus')) },
              ['id', 'createdAt', 'cwd', 'here', 'status'],
            ),
          },
        },
        ['sessions'],
      ),
      SessionRead: object(
        {
          session: object(
            {
              id: string,
              header: object({ id: string, createdAt: { type: 'number' }, cwd: string }, ['id', 'createdAt'], true),
              nextSeq: seq,
              turns: { type: 'integer', minimum: 0 },
              status: ref('SessionStatus'),
              lastTurn: nullable(object({ turn: { type: 'integer' }, reason: { type: 'object' } }, ['turn', 'reason'])),
              holder: nullable(ref('LeaseHolder')),
              here: { type: 'boolean' },
            },
            ['id', 'header', 'nextSeq', 'turns', 'status', 'lastTurn', 'holder', 'here'],
          ),
          events: { type: 'array', items: ref('SessionEvent') },
        },
        ['session', 'events'],
      ),
      Decision: { enum: ['allow', 'allow-session', 'deny'] },
      AnswerApproval: object(
        {
          decision: ref('Decision'),
          note: { type: 'string', description: 'Reaches the model with a deny' },
          by: { type: 'string', description: 'Who answered' },
        },
        ['decision'],
      ),
      ApprovalAnswered: object({ id: string, callId: string, decision: ref('Decision'), note: string }, ['id', 'callId', 'decision']),
      Health: object(
        {
          status: { enum: ['ok', 'draining'] },
          host: string,
          pid: { type: 'integer' },
          uptimeMs: { type: 'number' },
          store: string,
          agents: object({ open: { type: 'integer' }, running: { type: 'integer' } }, ['open', 'running']),
        },
        ['status', 'host', 'pid', 'uptimeMs', 'store', 'agents'],
      ),
      Ready: object({ status: { enum: ['ready', 'draining', 'store-unavailable'] }, reason: string, host: string, store: string }, ['status', 'host', 'store']),
    },
  },
}
