import { SystemPrompt } from './service.ts'

export default SystemPrompt
export {
  DEFAULT_IDENTITY,
  IDENTITY_ORDER,
  IDENTITY_SECTION,
  PERSONA_ORDER,
  PERSONA_SECTION,
  SystemPrompt,
  type SystemPromptConfig,
} from './service.ts'
export {
  CONTEXT_SNAPSHOT_HEADER,
  interpolate,
  joinContextSections,
  referencedVariables,
  renderAssembly,
  RenderedText,
  type RenderedAssembly,
  renderContextSections,
  renderContextSnapshot,
  renderPrompt,
  VARIABLE_NAME,
} from './render.ts'
export { compareCodeUnits, TOOL_ORDER_REST } from './tool-order.ts'
export { difference, findInstabilities, type Instability, PROMPT_UNSTABLE, PromptUnstableError, type StabilityCheckMode } from './stability.ts'
export { defaultTrust } from './service.ts'
export {
  type Asserted,
  type Assertion,
  type Conflict,
  CONFLICT_NOTICE,
  CONFLICT_ORDER,
  frontMatterAsserts,
  type FrontMatterAsserts,
  TRUST_ORDER,
} from './conflicts.ts'
export { BUDGET_NOTICE, type BudgetOverflow, type CategoryBudgets, type Omission, type Placement } from './allocate.ts'
export type * from './types.ts'
