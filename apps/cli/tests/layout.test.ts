// The CLI's source is laid out by command: one file per command under
// src/commands/ (its plan), the context they share in src/context.ts, the
// presenters in src/present/, and no import cycle anywhere in src/, counting
// type-only imports and dynamic `import('./…')` as well (a cycle of types still
// ties the modules together: neither can be read, moved or tested alone).
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, it } from 'vitest'
import { COMMANDS, CONVERSATION } from '../src/commands.ts'

const SRC = fileURLToPath(new URL('../src/', import.meta.url))

/** Every .ts file under `dir`, relative to src/ with forward slashes. */
function sources(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap(entry => {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sources(path)
    return entry.name.endsWith('.ts') ? [relative(SRC, path).split('\\').join('/')] : []
  })
}

/** The relative modules a file imports: `import`, `import type`, `export … from`, and `import('./…')` with a literal path. */
function importsOf(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS)
  const found: string[] = []
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text)
    }
    if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [target] = node.arguments
      if (target && ts.isStringLiteralLike(target)) found.push(target.text)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
    .filter(path => path.startsWith('.'))
    .map(path =>
      relative(SRC, resolve(SRC, dirname(file), path))
        .split('\\')
        .join('/'),
    )
}

type Graph = Map<string, string[]>

function graphOf(files: Record<string, string>): Graph {
  return new Map(Object.entries(files).map(([file, text]) => [file, importsOf(file, text).filter(target => target in files)]))
}

/** Every import cycle, each once, as the files around it (`a.ts → b.ts → a.ts`); Tarjan's strongly connected components. */
function cyclesOf(graph: Graph): string[] {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const components: string[][] = []
  const connect = (file: string) => {
    index.set(file, next)
    low.set(file, next++)
    stack.push(file)
    onStack.add(file)
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target)
        low.set(file, Math.min(low.get(file)!, low.get(target)!))
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file)!, index.get(target)!))
      }
    }
    if (low.get(file) !== index.get(file)) return
    const component: string[] = []
    let member: string
    do {
      member = stack.pop()!
      onStack.delete(member)
      component.push(member)
    } while (member !== file)
    if (component.length > 1 || graph.get(file)?.includes(file)) components.push(component)
  }
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) connect(file)
  // Each component shown as its shortest cycle through its first file, and the other files tied into it.
  return components
    .map(component => {
      const members = new Set(component)
      const start = [...component].sort()[0]
      const from = new Map<string, string>()
      const queue = [start]
      for (const at of queue) {
        for (const target of graph.get(at) ?? []) {
          if (target === start) {
            const path = [start]
            for (let step: string | undefined = at; step !== start && step !== undefined; step = from.get(step)) path.splice(1, 0, step)
            const others = component.filter(member => !path.includes(member)).sort()
            return [...path, start].join(' → ') + (others.length ? ` (tied in too: ${others.join(', ')})` : '')
          }
          if (members.has(target) && !from.has(target)) {
            from.set(target, at)
            queue.push(target)
          }
        }
      }
      throw new Error(`no cycle through ${start}`)
    })
    .sort()
}

const read = (file: string) => readFileSync(join(SRC, file), 'utf8')
const TREE = Object.fromEntries(sources().map(file => [file, read(file)]))

/** The file a command's plan lives in: `sessions show` → commands/sessions-show.ts; the conversation (`loom`) → commands/conversation.ts. */
const fileOf = (command: string) => `commands/${command === CONVERSATION.name ? 'conversation' : command.replace(/ /g, '-')}.ts`

describe('the layout of apps/cli/src', () => {
  it('has no import cycle (static, type-only or dynamic)', () => {
    expect(cyclesOf(graphOf(TREE))).toEqual([])
  })

  it('finds a cycle and names its files, through type-only and dynamic imports alike', () => {
    const cycles = cyclesOf(
      graphOf({
        'cli.ts': "import { helper } from './commands/run.ts'\nconst later = () => import('./present/turn.ts')",
        'commands/run.ts': "import type { Context } from '../cli.ts'",
        'present/turn.ts': "export { x } from './view.ts'",
        'present/view.ts': "const template = `import { no } from './turn.ts'`\nexport const x = await import('./turn.ts')",
        'alone.ts': "import './alone.ts'",
      }),
    )
    expect(cycles).toEqual(['alone.ts → alone.ts', 'cli.ts → commands/run.ts → cli.ts', 'present/turn.ts → present/view.ts → present/turn.ts'])
  })

  it('has one file per command under src/commands/, each exporting its plan', () => {
    const missing = [...COMMANDS.map(command => command.name), CONVERSATION.name].filter(command => !existsSync(join(SRC, fileOf(command))))
    expect(missing, 'commands without a file under src/commands/').toEqual([])
    for (const command of COMMANDS) expect(TREE[fileOf(command.name)], fileOf(command.name)).toMatch(/^export const plan\b/m)
  })

  it('the registry (commands/index.ts) imports the file of every command of the table, and of the conversation', () => {
    const registry = importsOf('commands/index.ts', read('commands/index.ts')).filter(file => file.startsWith('commands/'))
    expect(registry.sort()).toEqual([...COMMANDS.map(command => command.name), CONVERSATION.name].map(fileOf).sort())
  })

  it('keeps the shared context in one module, which imports no command', () => {
    expect(Object.keys(TREE)).toContain('context.ts')
    const imports = importsOf('context.ts', TREE['context.ts'])
    expect(imports.filter(target => target.startsWith('commands/') || target === 'cli.ts')).toEqual([])
    for (const [file, text] of Object.entries(TREE)) {
      if (file === 'context.ts') continue
      expect(text, `${file} declares a type of the shared context`).not.toMatch(/^export (interface|type) (Context|Plan|MainOptions|Interrupt)\b/m)
    }
  })
})
