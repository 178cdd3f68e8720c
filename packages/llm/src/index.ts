export type * from './types.ts'
export {
  createAssistantMessage,
  createToolResultMessage,
  createUserMessage,
  deepFreeze,
  freezeMessage,
  userText,
} from './messages.ts'
export { errorChain, HarnessError, LLM_ERROR_CODES, LlmError, toFailure, type LlmErrorCode, type LlmErrorDetails } from './errors.ts'
export {
  DEFAULT_RETRY_POLICY,
  LlmAdapter,
  maxRetriesOf,
  reasoningInfo,
  RETRIED_ONCE_CODES,
  retryDelay,
  type GenerateOptions,
  type LlmModelInfo,
  type ResolvedRetryPolicy,
} from './adapter.ts'
export { BlockAssembler } from './assembler.ts'
export {
  isAgentLoopRequest,
  Llm,
  markAgentLoopRequest,
  type AdapterRegistration,
  type PreparedLlmCall,
} from './service.ts'

export { Llm as default } from './service.ts'
export { frozenJsonSnapshot, jsonSnapshot, NonJsonError, type JsonValue } from './json.ts'
export {
  BLOCK_OVERHEAD,
  CHARS_PER_TOKEN,
  estimateBlock,
  estimateHeader,
  estimateMessage,
  estimateSystemTokens,
  estimateText,
  estimateToolsTokens,
  ROLE_OVERHEAD,
  type EstimatedHeader,
} from './tokens.ts'
export { ROUTE_LIMITS, routeConfigFields, type RouteConfig, type RouteDefaults } from './route-config.ts'
export { SseLimitError, SseParser, type SseEvent } from './sse.ts'
export {
  abortedError,
  fetchEventStream,
  parseRetryAfter,
  requestIdOf,
  resolveEndpoint,
  type Endpoint,
  type EndpointOptions,
  type EventStreamLimits,
  type EventStreamRequest,
} from './http.ts'
