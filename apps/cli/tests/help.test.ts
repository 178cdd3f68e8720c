// The command table drives the help and the option check: `loom --help` lists
// every command and option, `loom help <command>` and `loom <command> --help`
// show only that command's options, and an option a command does not take
// exits 2 with one line naming the command and the help to read.
import { describe, expect, it } from 'vitest'
import { COMMANDS, OPTIONS } from '../src/commands.ts'
import { loom, project } from './helpers.ts'

const at = project()

/** The flags listed under `Options:` of a help text. */
function listedOptions(help: string): string[] {
  const section = help.split(/\nOptions[^\n]*:\n/)[1]?.split('\n\n')[0] ?? ''
  return section.split('\n').map(line => /--[a-z-]+/.exec(line)?.[0] ?? line)
}

describe('loom --help', () => {
  it('lists every command with its summary, every option with the commands it is for, and the environment', async () => {
    const run = await loom(['--help'], at)
    expect(run.code).toBe(0)
    for (const command of COMMANDS) expect(run.stdout).toMatch(new RegExp(`^  ${command.name}\\b.* ${escape(command.summary)}$`, 'm'))
    expect(listedOptions(run.stdout)).toEqual(Object.keys(OPTIONS).map(name => `--${name}`))
    expect(run.stdout).toMatch(/^ {2}--model <id> +model id \(loom, run, resume, prompt, dev, sessions resume, sessions compact\)$/m)
    expect(run.stdout).toMatch(/^ {2}--json +machine-readable output \(run, prompt, config, sessions, plugins\)$/m)
    expect(run.stdout).toMatch(/^ {2}--out <file> +.*\(schema\)$/m)
    expect(run.stdout).toContain('DEEPSEEK_API_KEY')
    // No command: the overview, as a usage error.
    const bare = await loom([], at)
    expect([bare.code, bare.stdout]).toEqual([2, run.stdout])
  })
})

describe('help of one command', () => {
  it('shows its synopsis, description, only its options, and examples; exit 0', async () => {
    const run = await loom(['sessions', 'stats', '--help'], at)
    expect(run.code).toBe(0)
    expect(run.stdout).toMatch(/^Usage: loom sessions stats ID\|prefix\|last \[options\]\n\nprefix reuse between consecutive requests/)
    expect(listedOptions(run.stdout)).toEqual(['--json', '--hit-price', '--miss-price', '--output-price', '--write-price', '--bundle', '--patch', '--help'])
    expect(run.stdout).toContain('\nExamples:\n  loom sessions stats ')
    // The same text, asked for either way.
    expect((await loom(['help', 'sessions', 'stats'], at)).stdout).toBe(run.stdout)
    expect((await loom(['--help', 'sessions', 'stats', 'some-id'], at)).stdout).toBe(run.stdout)
  })

  it('every command lists exactly the options it takes', async () => {
    for (const command of COMMANDS) {
      const run = await loom(['help', ...command.name.split(' ')], at)
      expect(run.code, command.name).toBe(0)
      expect(listedOptions(run.stdout), command.name).toEqual([...command.options, 'help'].map(name => `--${name}`))
    }
    const config = (await loom(['config', '--help'], at)).stdout
    expect(config).not.toContain('--model')
    expect(listedOptions((await loom(['run', '--help'], at)).stdout)).toContain('--max-steps')
  })

  it('new plugin says what it scaffolds', async () => {
    const run = await loom(['help', 'new', 'plugin'], at)
    expect(run.stdout).toContain(
      'scaffold a plugin project in ./NAME: package.json, src/index.ts (a tool with its guidance section and a Config), a test with the test kit, README',
    )
  })

  it("a group's help lists its commands", async () => {
    const run = await loom(['sessions', '--help'], at)
    expect(run.code).toBe(0)
    for (const sub of [
      'list',
      'show ID|prefix|last',
      'resume ID|prefix|last "<task>"',
      'verify ID|prefix|last',
      'repair ID|prefix|last',
      'stats ID|prefix|last',
      'manifest ID|prefix|last',
      'compact ID|prefix|last',
    ])
      expect(run.stdout).toContain(`  sessions ${sub} `)
    expect((await loom(['help', 'sessions'], at)).stdout).toBe(run.stdout)
  })

  it('help for something that is no command is a usage error', async () => {
    const run = await loom(['help', 'frobnicate'], at)
    expect(run.code).toBe(2)
    expect(run.stderr).toBe('loom: unknown command "frobnicate"; see: loom --help\n')
  })
})

describe('usage errors', () => {
  it('an option the command does not take exits 2 with one line naming the command, what the option is for, and its help', async () => {
    const config = await loom(['config', '--model', 'x'], at)
    expect(config.code).toBe(2)
    expect(config.stdout).toBe('')
    expect(config.stderr).toBe(
      'loom: config: --model does not apply here (it is for: run, resume, prompt, dev, sessions resume, sessions compact); see: loom config --help\n',
    )
    const list = await loom(['sessions', 'list', '--hit-price', '1'], at)
    expect([list.code, list.stderr]).toEqual([
      2,
      'loom: sessions list: --hit-price does not apply here (it is for: sessions stats); see: loom sessions list --help\n',
    ])
    const plugins = await loom(['plugins', '--bundle', 'minimal'], at)
    expect(plugins.code).toBe(2)
    expect(plugins.stderr).toContain('plugins: --bundle does not apply here (it is for: run, resume, prompt, dev, config, sessions list')
  })

  it('other mistakes point at the help of the command they were made in', async () => {
    const option = await loom(['--bundle', 'minimal', 'run', '--fast', 'hi'], at)
    expect([option.code, option.stderr]).toEqual([2, "loom: Unknown option '--fast'; see: loom run --help\n"])
    const argument = await loom(['config', 'extra'], at)
    expect([argument.code, argument.stderr]).toEqual([2, 'loom: config: unexpected argument "extra"; see: loom config --help\n'])
    const missing = await loom(['new', 'plugin'], at)
    expect(missing.stderr).toBe('loom: new plugin: missing the name of the plugin, as in: loom new plugin my-tool; see: loom new plugin --help\n')
    const sub = await loom(['sessions', 'frobnicate'], at)
    expect(sub.stderr).toBe(
      'loom: unknown sessions command "frobnicate" (list, show, resume, verify, repair, stats, manifest, compact); see: loom sessions --help\n',
    )
  })
})

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
