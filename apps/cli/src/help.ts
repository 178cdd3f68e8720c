// The help texts, all derived from the command table: the overview (`loom
// --help`), one command's (`loom help sessions stats`, `loom run --help`), and a
// group's (`loom help sessions`).
import { COMMANDS, commandsFor, CONVERSATION, GLOBAL_OPTIONS, GROUPS, lookup, OPTIONS, subcommands, type CommandSpec, type OptionName } from './commands.ts'
import { UsageError } from './errors.ts'

const ENVIRONMENT = `Environment:
  DEEPSEEK_API_KEY               use DeepSeek (route deepseek, model deepseek-flash); DEEPSEEK_BASE_URL overrides its URL
  ANTHROPIC_API_KEY              use Anthropic (route anthropic); ANTHROPIC_BASE_URL overrides its URL
  OPENAI_BASE_URL, OPENAI_API_KEY  use an OpenAI-compatible server (route openai); OPENAI_MODEL picks the model
  LOOM_HOME                      where sessions are stored (default ~/.loom; sessions in $LOOM_HOME/sessions)
  LOOM_SERVE_TOKEN               the bearer token of loom serve (or --token-file)
  With no key set, an offline demo model answers (route scripted).
`

const synopsis = (command: CommandSpec) => [command.name, ...command.args.map(arg => arg.name)].join(' ')

function flag(name: OptionName): string {
  const option = OPTIONS[name]
  const value = 'value' in option ? ` ${option.value}` : ''
  return `${'short' in option ? `-${option.short}, ` : ''}--${name}${value}`
}

const FLAG_WIDTH = Math.max(...(Object.keys(OPTIONS) as OptionName[]).map(name => flag(name).length)) + 2
const optionLine = (name: OptionName, suffix = '') => `  ${flag(name).padEnd(FLAG_WIDTH)}${OPTIONS[name].help}${suffix}`

/** The commands an option is for, as the overview says it: a whole group by its name, and `loom` for the conversation. */
function takers(name: OptionName): string {
  const names = commandsFor(name)
  const shown: string[] = (CONVERSATION.options as readonly string[]).includes(name) ? ['loom'] : []
  for (const command of names) {
    const group = command.split(' ')[0]
    const whole = command !== group && subcommands(group).every(sub => names.includes(sub.name))
    const label = whole ? group : command
    if (!shown.includes(label)) shown.push(label)
  }
  return shown.join(', ')
}

/** `loom --help`: every command, every option with the commands it is for, the environment. */
export function overview(): string {
  const width = Math.max(...COMMANDS.map(command => synopsis(command).length)) + 2
  const options = (Object.keys(OPTIONS) as OptionName[]).map(name => optionLine(name, GLOBAL_OPTIONS.includes(name) ? '' : ` (${takers(name)})`))
  return [
    `Usage: loom [options]             ${CONVERSATION.summary}`,
    '       loom <command> [options]',
    '',
    CONVERSATION.details,
    '',
    'Commands:',
    ...COMMANDS.map(command => `  ${synopsis(command).padEnd(width)} ${command.summary}`),
    '',
    'Options (a command refuses one it does not use; loom <command> --help lists its own):',
    ...options,
    '',
    ENVIRONMENT,
  ].join('\n')
}

/** One command: its synopsis, what it does, only its options, examples. */
export function commandHelp(command: CommandSpec): string {
  const options = [...command.options, ...GLOBAL_OPTIONS.filter(name => name === 'help')]
  return [
    `Usage: loom ${synopsis(command)}${command.options.length ? ' [options]' : ''}`,
    '',
    command.summary,
    ...(command.details ? ['', command.details] : []),
    '',
    'Options:',
    ...options.map(name => optionLine(name)),
    '',
    'Examples:',
    ...command.examples.map(example => `  ${example}`),
    '',
  ].join('\n')
}

function groupHelp(group: string): string {
  const commands = subcommands(group)
  const width = Math.max(...commands.map(command => synopsis(command).length)) + 2
  return [
    `Usage: loom ${group} <command> [options]`,
    '',
    GROUPS[group],
    '',
    'Commands:',
    ...commands.map(command => `  ${synopsis(command).padEnd(width)} ${command.summary}`),
    '',
    `loom ${group} <command> --help shows a command's options and examples.`,
    '',
  ].join('\n')
}

/** The help for what the words name: nothing (the overview), a group, or a command (words after it are its arguments). */
export function helpFor(words: readonly string[]): string {
  const found = lookup(words)
  if (found === undefined) return overview()
  if ('command' in found) return commandHelp(found.command)
  if ('group' in found && found.sub === undefined) return groupHelp(found.group)
  throw new UsageError('group' in found ? `unknown ${found.group} command "${found.sub}"` : `unknown command "${found.unknown}"`)
}

/** Where a usage error points: the help of the command the words name, else the overview. */
export function seeHelp(words: readonly string[]): string {
  const found = lookup(words)
  if (found && 'command' in found && found.command.name !== 'help') return `loom ${found.command.name} --help`
  if (found && 'group' in found) return `loom ${found.group} --help`
  return 'loom --help'
}
