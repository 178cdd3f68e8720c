import type { Context } from '@deepseek-ai/cordis'
import Schema from '@deepseek-ai/schemastery'
import type {} from '@loom/system-prompt'
import { type PreToolDecision, TOOL_EFFECTS, type ToolEffect, type ToolRunContext } from '@loom/tools'
import { cutChars, displayPath, resolveInWorkspace, workspaceRootOf } from '@loom/tools/workspace'
import { compileRules, firstMatch, type Action, type CallFacts, type CompiledRule, type Rule } from './rules.ts'

export { commandMatches, compileRules, firstMatch, globToRegExp, type Action, type CallFacts, type CompiledRule, type Rule } from './rules.ts'

export const name = '@loom/permissions'
export const inject = ['tools', 'systemPrompt']

/** A policy-mode section: the model learns that a refused call says why, and that retrying it unchanged is pointless. */
export const SECTION_NAME = 'policy:permissions'
export const SECTION_ORDER = 50
export const GUIDANCE =
  'Some tool calls are checked against permission rules and may need approval. A call that is denied or not approved returns an error saying why: do not repeat it unchanged; take another way or ask the user.'

export interface Config {
  rules: Rule[]
  default: Action
  root?: string
}

const action = Schema.union(['allow', 'ask', 'deny'] as const)

export const Config: Schema<Config> = Schema.object({
  rules: Schema.array(
    Schema.object({
      tool: Schema.string().description('A tool name (`bash`, `write`, ...) or `*` for every tool (the default).'),
      effects: Schema.array(Schema.union([...TOOL_EFFECTS])).description(
        'Effects of the call, as its tool declares them: `read`, `write` (the workspace), `execute` (programs), `network`, `outside` (acts outside Loom, as an MCP tool that is not read-only). An `allow` rule matches a call whose every effect is listed; an `ask` or `deny` rule, a call with any of them. A tool that declares nothing never matches.',
      ),
      action: action.required().description('`allow` runs the call, `ask` asks the approver, `deny` refuses it with a reason the model reads.'),
      commands: Schema.array(Schema.string()).description(
        "Prefixes of the call's `command` argument (bash), matched word by word: `git status` matches `git status -s`. An `allow` rule only matches a plain command without `;`, `&&`, `|`, `$(...)`, redirection or backslashes; an `ask` or `deny` rule matches any part of a command line.",
      ),
      paths: Schema.array(Schema.string()).description(
        "Globs of the call's `path` argument (read, write, edit), relative to the workspace: `*` within a directory, `**` across directories, `?` one character.",
      ),
      unattended: Schema.union(['allow', 'deny'] as const).description(
        'An `ask` rule only: how a run with nobody to ask (headless, `--approve policy`) answers it. Absent: deny. The default bundle asks for bash, write and edit at the terminal and lets them run unattended.',
      ),
    }),
  )
    .default([])
    .description('Checked in order; the first rule whose tool and patterns match decides. A rule with patterns never matches a call without that argument.'),
  default: action.default('ask').description('The action when no rule matches.'),
  root: Schema.string().description(
    "Workspace root the path globs are relative to (as the file tools' `root`). Absent: the calling agent's session cwd, else the process cwd.",
  ),
}) as Schema<Config>

/** Longest command or path quoted back to the model in a reason. */
const QUOTE_CHARS = 200

/**
 * Decides every tool call by the first matching rule, else the default action, as
 * a `tools/pre-execute` listener: `ask` goes to the approver (`ctx.approver`), and
 * names the rule so an `allow-session` answer covers it for the rest of the session.
 */
export function apply(ctx: Context, config: Config) {
  let rules: CompiledRule[]
  try {
    rules = compileRules(config.rules ?? [])
  } catch (error) {
    throw new Error(`${name}: ${error instanceof Error ? error.message : String(error)}`, { cause: error })
  }
  const fallback = config.default ?? 'ask'

  ctx.systemPrompt.section({ name: SECTION_NAME, order: SECTION_ORDER, text: GUIDANCE })
  ctx.on('tools/pre-execute', async (exec, next) => {
    const call = await factsOf(exec, config.root, ctx.tools.effectsOf(exec))
    const rule = firstMatch(rules, call)
    const decision = decisionOf(rule ? rule.rule.action : fallback, call, rule)
    if (decision.kind !== 'allow') return decision
    // Later listeners may still refuse what the rules allow; an allow stays this policy's, so it is recorded.
    const later = await next()
    return later.kind === 'allow' ? decision : later
  })
}

/** The tool, its effects, its `command` and its `path` relative to the workspace (symlinks resolved; absent when outside). */
export async function factsOf(
  exec: Pick<ToolRunContext, 'name' | 'arguments' | 'agent'>,
  root: string | undefined,
  effects?: readonly ToolEffect[],
): Promise<CallFacts> {
  const args = typeof exec.arguments === 'object' && exec.arguments !== null ? (exec.arguments as Record<string, unknown>) : {}
  const facts: CallFacts = { tool: exec.name, ...(effects && { effects }) }
  if (typeof args.command === 'string') facts.command = args.command
  if (typeof args.path === 'string' && args.path !== '') {
    try {
      const resolved = await resolveInWorkspace(workspaceRootOf(root, exec), args.path)
      facts.path = displayPath(resolved.root, resolved.path)
    } catch {
      // Outside the workspace (or unresolvable): no path rule matches; the tool refuses it itself.
    }
  }
  return facts
}

function decisionOf(action: Action, call: CallFacts, rule: CompiledRule | undefined): PreToolDecision {
  if (action === 'allow') return { kind: 'allow' }
  const by = rule ? `permissions rule ${rule.index + 1}` : 'the permissions default'
  const subject =
    call.command !== undefined
      ? `${call.tool} command ${quote(call.command)}`
      : call.path !== undefined
        ? `${call.tool} of ${quote(call.path)}`
        : `tool "${call.tool}"`
  if (action === 'deny') return { kind: 'deny', reason: `${subject} is denied by ${by}` }
  const unattended = rule?.rule.unattended
  return { kind: 'ask', reason: `${subject} needs approval under ${by}`, rule: rule ? `rule ${rule.index + 1}` : 'default', ...(unattended && { unattended }) }
}

function quote(text: string): string {
  return JSON.stringify(text.length > QUOTE_CHARS ? `${cutChars(text, QUOTE_CHARS)}...` : text)
}
