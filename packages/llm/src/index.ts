export type * from './types.ts'
export {
  createAssistantMessage,
  createToolResultMessage,
  createUserMessage,
  deepFreeze,
  freezeMessage,
  userText,
} from './messages.ts'
