// The entry point for plugin authors: what a Loom plugin needs, from one package.
// Importing it also brings the `ctx.systemPrompt` and `ctx.tools` types onto
// Cordis's Context.
export type { Context, Inject } from '@deepseek-ai/cordis'
export { default as Schema } from '@deepseek-ai/schemastery'
export type { AgentRef } from '@loom/scope'
export { withScope } from '@loom/scope'
export type {
  AssembleContext,
  ContextBudget,
  PromptContext,
  PromptSection,
  PromptText,
  Stability,
  ToolSchema,
  VariableOptions,
} from '@loom/system-prompt'
export type { ToolDefinition, ToolOutput, ToolRunContext, ToolSpec } from '@loom/tools'
export { defineTool, errorResult } from '@loom/tools'
