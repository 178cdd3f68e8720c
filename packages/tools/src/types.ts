import type { ContentBlock, UserMessage } from '@loom/llm'
import type { AgentRef } from '@loom/scope'

export type { ToolSchema } from '@loom/system-prompt'

export type { JsonValue } from '@loom/llm'
import type { JsonValue } from '@loom/llm'

/**
 * What a tool body returns: plain text, content blocks, or content with a JSON
 * `meta` (for the log and UIs, never shown to the model) and `concludesTurn`.
 */
export type ToolOutput = string | ContentBlock[] | { content: string | ContentBlock[]; meta?: JsonValue; concludesTurn?: boolean }

/** One tool call as the runtime sees it. Hooks and the body receive it frozen. */
export interface ToolRunContext {
  readonly callId: string
  readonly name: string
  /** Snapshot of the arguments, deeply frozen. A raw string when the model's JSON was invalid. */
  readonly arguments: unknown
  /** The initiator (the agent that made the call), passed through. */
  readonly agent?: AgentRef
  /** The scope the call runs in: selects the visible tools and the hooks that hear it. */
  readonly scope?: object
  /** Always present. The body's signal also fires when `timeoutMs` passes. */
  readonly signal: AbortSignal
  /** Queues a message that enters the conversation after this call's result (next step). */
  deferContext(message: UserMessage): void
  /** Ends the turn after this step's results, unless something else asks for another step. */
  concludeTurn(): void
}

export interface ToolDefinition {
  readonly name: string
  readonly description: string
  /** JSON schema of the arguments; must describe an object. */
  readonly parameters: Record<string, unknown>
  // biome-ignore lint/suspicious/noExplicitAny: the arguments were checked against `parameters`; a typed body narrows them
  execute(args: any, exec: ToolRunContext): ToolOutput | Promise<ToolOutput>
  /** `true` (or a classifier returning exactly `true`) lets calls run alongside other safe calls. */
  readonly isConcurrencySafe?: boolean | ((args: unknown) => boolean)
  /** A call past it is aborted and returns an error result with code `TIMEOUT`. */
  readonly timeoutMs?: number
  /**
   * The absolute paths a call would create or change, symlinks resolved as the tool will follow
   * them (`resolveInWorkspace` or `realpathLoose` of `@loom/tools/workspace` give such paths; a
   * path through a link would be checked where the link is, not where the write lands). `[]` when
   * it cannot tell, the body then refusing the call itself. A protected one (`tools.protect`) is
   * asked about before any pre-execute listener, and refused where nobody can answer.
   */
  readonly writes?: (args: unknown, exec: ToolRunContext) => readonly string[] | Promise<readonly string[]>
  /**
   * What a call may do, for the approval gate (see `ToolEffect`): a list, or a function of the
   * checked arguments (a dispatcher takes its inner tool's). Absent: unknown, which the gate
   * treats as anything (`--approve never` refuses it, the default policy asks).
   */
  readonly effects?: readonly ToolEffect[] | ((args: unknown, exec: ToolRunContext) => readonly ToolEffect[])
  /** Who acts when it runs, shown in approval questions: `MCP server "fs"`. */
  readonly origin?: string
  /** The tool may destroy data (as an MCP server's `destructiveHint` says): shown in approval questions. */
  readonly destructive?: boolean
  /**
   * A call that needs a person's yes whatever the permission rules say (the shell when it runs
   * without its sandbox), or `undefined`. Asked before any pre-execute listener, like a write to a
   * protected path; `unattended` is the answer where nobody can be asked (absent: deny).
   */
  readonly requiresApproval?: (args: unknown, exec: ToolRunContext) => ApprovalNeed | undefined
}

/** Why a call needs a person's yes: the question's reason, the rule an allow-session answer covers, and the answer where nobody can be asked (absent: deny). */
export interface ApprovalNeed {
  reason: string
  rule: string
  unattended?: Unattended
  /** What the model reads when the call is refused because nobody could answer: how a person lets it run (see `ApprovalRequest.refusal`). */
  refusal?: string
}

/**
 * What a tool call may do, as the approval gate sorts calls: `read` observes and changes nothing
 * outside the session (reading files, searching, loading a skill); `write` changes files of the
 * workspace; `execute` runs programs; `network` reaches the network; `outside` acts outside Loom
 * (another system, as an MCP server's tools do). A call is a read when every effect it declares is.
 */
export type ToolEffect = 'read' | 'write' | 'execute' | 'network' | 'outside'

export interface ToolErrorInfo {
  name: string
  code: string
}

export type ToolExecutionResult =
  | {
      isError: false
      content: ContentBlock[]
      meta?: JsonValue
      additionalContexts?: UserMessage[]
      concludesTurn?: true
    }
  | {
      isError: true
      error: { message: string; info?: ToolErrorInfo }
      content: ContentBlock[]
      meta?: JsonValue
      additionalContexts?: UserMessage[]
    }

export interface ToolCallInput {
  callId: string
  name: string
  arguments: unknown
  agent?: AgentRef
  scope?: object
  signal: AbortSignal
}

/**
 * What a `tools/pre-execute` listener decides. `ask` hands the call to the approver
 * (`ctx.approver`); `rule` names the policy rule that asked, so an `allow-session`
 * answer covers later calls of the same tool under the same rule.
 */
/**
 * A `tools/pre-execute` listener's verdict. An `ask` goes to the approver; its
 * `unattended` says how an approver with nobody to ask (a headless run under
 * `--approve policy`) should answer: `allow`, or `deny` (the default).
 */
export type PreToolDecision =
  | { kind: 'allow' }
  | { kind: 'deny'; reason: string }
  | { kind: 'ask'; reason?: string; rule?: string; unattended?: Unattended; refusal?: string }

/** How an `ask` is answered where nobody can be asked. */
export type Unattended = 'allow' | 'deny'

/** What the approver is asked: the call, why it needs approval, and who makes it. */
export interface ApprovalRequest {
  readonly tool: string
  readonly callId: string
  /** The call's arguments, deeply frozen (a raw string when the model's JSON was invalid). */
  readonly args: unknown
  /** The policy's reason for asking. */
  readonly reason?: string
  /** The policy rule that asked. */
  readonly rule?: string
  /** The policy's answer for an approver with nobody to ask (absent: deny). */
  readonly unattended?: Unattended
  /**
   * What the model should read when the call is refused because nobody could answer: how a
   * person lets such a call run (a protected path: only at the terminal). Absent: the
   * approver says why it could not ask.
   */
  readonly refusal?: string
  /** What the call may do, as its tool declares (absent: unknown). */
  readonly effects?: readonly ToolEffect[]
  /** Who acts (`MCP server "fs"`), when not Loom's own tool. */
  readonly origin?: string
  /** The tool may destroy data. */
  readonly destructive?: boolean
  /** Where the call would write, as its tool resolves the paths (`ToolDefinition.writes`): a question can show what it changes. */
  readonly writes?: readonly string[]
  readonly agent?: AgentRef
  /** The calling agent's session id. */
  readonly session?: string
  /** Fires when the call is aborted: stop asking. */
  readonly signal: AbortSignal
}

/** An approver's answer: run this call, run every call of this tool and rule in this session, or do not run it (`note` reaches the model). */
export type ApprovalAnswer = { kind: 'allow' } | { kind: 'allow-session' } | { kind: 'deny'; note?: string }

/** The service under the ctx key `approver`: whoever can answer an `ask` (a prompt, a headless mode, a remote UI). */
export interface Approver {
  approve(request: ApprovalRequest): Promise<ApprovalAnswer>
  /**
   * Set by an approver that allows nothing but reads (`loom run --approve never`): every call that
   * is not a read (see `ToolEffect`) is refused before any listener, with this reason.
   */
  readonly readsOnly?: string
}

/**
 * How a call's pre-execute decision was settled, recorded in the result's
 * `meta.decision` whenever a listener decided (not when every listener passed the
 * default `allow` through). `answer` says who settled an `ask`: the approver
 * (`allow`, `allow-session`, `deny`), an earlier `allow-session` (`remembered`), or
 * nobody (`no-approver`).
 */
export type ToolDecision =
  | { policy: 'allow' }
  | { policy: 'deny'; reason: string }
  | { policy: 'ask'; answer: 'allow' | 'allow-session' | 'remembered' | 'deny' | 'no-approver'; reason?: string; rule?: string; note?: string }

export type PostToolDecision =
  | { kind: 'accept'; content?: string | ContentBlock[]; additionalContexts?: UserMessage[] }
  | { kind: 'block'; feedback: string | ContentBlock[]; additionalContexts?: UserMessage[] }

export type ExecutionMode = 'parallel' | 'exclusive'
