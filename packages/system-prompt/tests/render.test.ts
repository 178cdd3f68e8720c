// Groups I and J: renderPrompt, strict interpolation, context snapshots (spec §1.6, §2 I/J, §4 items 8, 9).
import { describe, expect, it } from 'vitest'
import {
  joinContextSections,
  renderAssembly,
  renderContextSections,
  renderContextSnapshot,
  renderPrompt,
  type AssembledContext,
  type AssembledSection,
  type PromptAssembly,
} from '@loom/system-prompt'
import { IDENTITY, root, schema } from './helpers.ts'

const HEADER = 'Current runtime context. This snapshot supersedes earlier runtime-context snapshots.'
const PATTERN = '/^[a-z][a-z0-9_]*$/'

type Vars = PromptAssembly['variables']

const section = (name: string, text: string): AssembledSection => ({ name, text, order: 0, stability: 'static', owner: 'test' })
const context = (name: string, text: string): AssembledContext => ({ name, text, order: 0, stability: 'step', owner: 'test' })

function assembly(parts: { sections?: AssembledSection[]; contexts?: AssembledContext[]; variables?: Vars } = {}): PromptAssembly {
  return { sections: parts.sections ?? [], contexts: parts.contexts ?? [], tools: [], variables: parts.variables ?? {}, variableInfo: {} }
}

/** Renders one section named `s` with the given text and variables. */
const one = (text: string, variables: Vars = {}) => renderPrompt(assembly({ sections: [section('s', text)], variables }))
/** Renders sections from texts, named s1, s2, ... */
const many = (texts: string[], variables: Vars = {}) => renderPrompt(assembly({ sections: texts.map((t, i) => section(`s${i + 1}`, t)), variables }))

const malformedAt = (fragment: string, owner = 's', kind = 'section') =>
  `malformed prompt variable reference at "${fragment}…" in ${kind} "${owner}" (references are complete simple {{name}} groups)`
const malformedName = (name: string, owner = 's', kind = 'section') =>
  `malformed prompt variable reference "{{${name}}}" in ${kind} "${owner}" (variable names match ${PATTERN})`

describe('renderPrompt joining', () => {
  it('drops exactly-empty sections and joins the rest with a blank line', () => {
    expect(renderPrompt(assembly({ sections: [section('empty', ''), section('real', 'content')] }))).toBe('content')
    expect(many(['a', '', 'b', 'c'])).toBe('a\n\nb\n\nc')
  })

  it('renders the empty string when every section is empty or there are none', () => {
    expect(many(['', ''])).toBe('')
    expect(many([])).toBe('')
  })

  it('keeps whitespace-only sections untrimmed', () => {
    expect(many([' ', 'b'])).toBe(' \n\nb')
    expect(many(['\n', ' x '])).toBe('\n\n\n x ')
  })

  it('drops a section that interpolates to the empty string', () => {
    expect(many(['{{e}}'], { e: '' })).toBe('')
    expect(many(['A', '{{e}}', 'B'], { e: '' })).toBe('A\n\nB')
  })
})

describe('strict interpolation', () => {
  it.each<[string, string, Vars]>([
    ['{{model}}}', 'M}', { model: 'M' }],
    ['{ {{model}} }', '{ M }', { model: 'M' }],
    ['shell ${X:-{{fallback} stays', 'shell ${X:-{{fallback} stays', {}],
    ['a {{model}} {{', 'a M {{', { model: 'M' }],
    ['}} {{', '}} {{', {}],
    ['{{model}', '{{model}', { model: 'M' }],
    ['v = {{model}}!', 'v = literal {{sneaky}} inside!', { model: 'literal {{sneaky}} inside' }],
    ['{{a}}{{b}}', '{{}}', { a: '{{', b: '}}' }],
    ['{{model}}{{model}}', 'MM', { model: 'M' }],
    ['[{{v}}]', '[$&]', { v: '$&' }],
    ['[{{v}}]', '[$1]', { v: '$1' }],
    ['[{{v}}]', '[$$]', { v: '$$' }],
    ['[{{v}}]', "[$`$']", { v: "$`$'" }],
    ['{{constructor}}', 'own-value', { constructor: 'own-value' }],
    ['on {{model_2}}\nnext', 'on m2\nnext', { model_2: 'm2' }],
    ['no references at all', 'no references at all', {}],
  ])('%j renders as %j', (text, expected, variables) => {
    expect(one(text, variables)).toBe(expected)
  })

  it('a group spanning a newline is a complete group with a malformed name', () => {
    expect(() => one('{{mo\ndel}}', { model: 'M' })).toThrow(new Error(malformedName('mo\ndel')))
  })

  it('an unknown name throws with the registered names', () => {
    expect(() => renderPrompt(assembly({ sections: [section('persona', 'on {{modle}}')], variables: { model: 'm' } }))).toThrow(
      new Error('unknown prompt variable "{{modle}}" in section "persona"; registered variables: model'),
    )
    expect(() => renderPrompt(assembly({ sections: [section('persona', 'on {{modle}}')] }))).toThrow(
      new Error('unknown prompt variable "{{modle}}" in section "persona"; registered variables: (none)'),
    )
  })

  it('the registered-variables list is in insertion order and includes undefined-valued names', () => {
    expect(() => one('{{x}} {{y}}', { zed: '1', x: 'X' })).toThrow(new Error('unknown prompt variable "{{y}}" in section "s"; registered variables: zed, x'))
    expect(() => one('{{y}}', { zed: '1', u: undefined, a: 'A' })).toThrow(
      new Error('unknown prompt variable "{{y}}" in section "s"; registered variables: zed, u, a'),
    )
  })

  it('a registered name whose value is undefined throws the no-value error', () => {
    expect(() => renderPrompt(assembly({ sections: [section('persona', 'in {{cwd}}')], variables: { cwd: undefined } }))).toThrow(
      new Error('prompt variable "{{cwd}}" has no value for this assembly (section "persona")'),
    )
  })

  it.each([' model ', '', 'Model', 'a-b', 'toString', '1a', '_a'])(
    'the complete group {{%s}} is a malformed name even when a variable of that name exists',
    name => {
      expect(() => one(`on {{${name}}}`, { model: 'M', [name]: 'value' })).toThrow(new Error(malformedName(name)))
    },
  )

  it.each([
    ['{{{model}}}', '{{{model}}}'],
    ['x {{a{b}} y {{model}}', '{{a{b}} y {{mode'],
    ['x {{ y {{model}}', '{{ y {{model}}'],
    ['{{model} }}', '{{model} }}'],
    ['x{{}y}}', '{{}y}}'],
  ])('an opening {{ in %j that forms no group while a }} follows throws malformed-at', (text, fragment) => {
    expect(() => one(text, { model: 'M' })).toThrow(new Error(malformedAt(fragment)))
  })

  it('prototype names are unknown unless they are own properties', () => {
    expect(() => one('on {{constructor}}', { model: 'm' })).toThrow(
      new Error('unknown prompt variable "{{constructor}}" in section "s"; registered variables: model'),
    )
    expect(() => one('{{valueof}}', Object.create({ valueof: 'inherited' }) as Vars)).toThrow(
      new Error('unknown prompt variable "{{valueof}}" in section "s"; registered variables: (none)'),
    )
  })

  it('the first error wins: sections in array order, then left to right', () => {
    expect(() => many(['ok', '{{unknown}}', '{{ bad }}'], {})).toThrow(
      new Error('unknown prompt variable "{{unknown}}" in section "s2"; registered variables: (none)'),
    )
    expect(() => many(['{{ bad }} {{unknown}}'], {})).toThrow(new Error(malformedName(' bad ', 's1')))
    expect(() => many(['{{none}} {{ bad }}'], { none: undefined })).toThrow(
      new Error('prompt variable "{{none}}" has no value for this assembly (section "s1")'),
    )
  })

  it('a text rendered again gives the same result or the same error (templates are kept per text)', () => {
    const text = 'A {{model}} B {{cwd}} C'
    expect(one(text, { model: 'm1', cwd: '/a' })).toBe('A m1 B /a C')
    expect(one(text, { model: 'm2', cwd: '/b' })).toBe('A m2 B /b C')
    expect(() => one(text, { model: 'm' })).toThrow(new Error('unknown prompt variable "{{cwd}}" in section "s"; registered variables: model'))
    expect(() => one(text, { model: 'm', cwd: undefined })).toThrow(new Error('prompt variable "{{cwd}}" has no value for this assembly (section "s")'))
    const broken = '{{model}} then {{ bad }}'
    for (let i = 0; i < 2; i++) {
      expect(() => one(broken, {})).toThrow(new Error('unknown prompt variable "{{model}}" in section "s"; registered variables: (none)'))
      expect(() => one(broken, { model: 'm' })).toThrow(new Error(malformedName(' bad ')))
      expect(() => renderContextSnapshot(assembly({ contexts: [context('c', broken)], variables: { model: 'm' } }))).toThrow(
        new Error(malformedName(' bad ', 'c', 'context')),
      )
    }
    const lone = '{{model}} then a lone {{ stays'
    expect(one(lone, { model: 'm' })).toBe('m then a lone {{ stays')
    expect(one(lone, { model: 'n' })).toBe('n then a lone {{ stays')
  })

  it('renderPrompt ignores contexts and tools and does not mutate its input', () => {
    const input: PromptAssembly = {
      sections: [section('a', 'A {{model}}'), section('b', '')],
      contexts: [context('broken', '{{missing}} {{ bad }}')],
      tools: [{ ...schema('{{missing}}'), owner: 'test' }],
      variables: { model: 'M' },
      variableInfo: {},
    }
    const copy = structuredClone(input)
    expect(renderPrompt(input)).toBe('A M')
    expect(input).toEqual(copy)
  })
})

describe('renderPrompt on assemblies', () => {
  it('renders an assembled prompt with the identity first and variables interpolated', async () => {
    const h = await root({ persona: 'You run on {{model}}.' })
    h.sp.variable('model', () => 'm-1')
    h.sp.section({ name: 'later', order: 10, text: 'Later {{model}}.' })
    expect(renderPrompt(await h.asm())).toBe(`${IDENTITY}\n\nYou run on m-1.\n\nLater m-1.`)
  })
})

describe('context snapshots', () => {
  it('errors in a context are attributed to the context', () => {
    expect(() => renderContextSnapshot(assembly({ contexts: [context('policy', 'Mode: {{missing}}.')] }))).toThrow(
      new Error('unknown prompt variable "{{missing}}" in context "policy"; registered variables: (none)'),
    )
    expect(() => renderContextSections(assembly({ contexts: [context('policy', '{{ x }}')] }))).toThrow(new Error(malformedName(' x ', 'policy', 'context')))
    expect(() => renderContextSnapshot(assembly({ contexts: [context('policy', '{{{x}}}')] }))).toThrow(new Error(malformedAt('{{{x}}}', 'policy', 'context')))
    expect(() => renderContextSnapshot(assembly({ contexts: [context('policy', '{{x}}')], variables: { x: undefined } }))).toThrow(
      new Error('prompt variable "{{x}}" has no value for this assembly (context "policy")'),
    )
  })

  it('the snapshot is the header, a blank line, then the non-empty bodies joined by blank lines', () => {
    const a = assembly({
      contexts: [context('a', 'x'), context('empty', ''), context('b', 'Mode: {{mode}}.'), context('blank', '{{e}}')],
      variables: { mode: 'strict', e: '' },
    })
    expect(renderContextSnapshot(a)).toBe(`${HEADER}\n\nx\n\nMode: strict.`)
  })

  it('the snapshot is empty when no context has text', () => {
    expect(renderContextSnapshot(assembly())).toBe('')
    expect(renderContextSnapshot(assembly({ contexts: [context('a', ''), context('b', '{{e}}')], variables: { e: '' } }))).toBe('')
  })

  it('the snapshot ignores sections', () => {
    expect(renderContextSnapshot(assembly({ sections: [section('s', '{{missing}}')], contexts: [context('c', 'C')] }))).toBe(`${HEADER}\n\nC`)
  })

  it('renderContextSections returns one {name, text} per context with non-empty interpolated text', () => {
    const a = assembly({
      contexts: [context('a', 'x'), context('empty', ''), context('b', '{{v}}'), context('ws', ' ')],
      variables: { v: 'V' },
    })
    const copy = structuredClone(a)
    expect(renderContextSections(a)).toEqual([
      { name: 'a', text: 'x' },
      { name: 'b', text: 'V' },
      { name: 'ws', text: ' ' },
    ])
    expect(a).toEqual(copy)
  })

  it('joinContextSections adds the header only to a non-empty body', () => {
    expect(joinContextSections([])).toBe('')
    expect(joinContextSections([{ name: 'a', text: 'x' }])).toBe(`${HEADER}\n\nx`)
    expect(
      joinContextSections([
        { name: 'a', text: 'x' },
        { name: 'b', text: 'y' },
      ]),
    ).toBe(`${HEADER}\n\nx\n\ny`)
  })

  it('renders the contexts of a real assembly in order', async () => {
    const h = await root()
    h.sp.variable('mode', () => 'plan')
    h.sp.context({ name: 'second', order: 20, text: 'Second.' })
    h.sp.context({ name: 'first', order: 10, text: () => 'Mode: {{mode}}.' })
    expect(renderContextSnapshot(await h.asm())).toBe(`${HEADER}\n\nMode: plan.\n\nSecond.`)
  })
})

describe('renderAssembly: one rendering per assembly', () => {
  it('renders each text once, shares it, and hashes the final text', async () => {
    const { createHash } = await import('node:crypto')
    const a = assembly({ sections: [section('a', 'Hello {{who}}.'), section('b', '')], variables: { who: 'Ada' } })
    const first = renderAssembly(a)
    expect(renderAssembly(a)).toBe(first)
    expect(first.sections.map(s => s.text)).toEqual(['Hello Ada.', ''])
    expect(first.sections[0].sha256).toBe(createHash('sha256').update('Hello Ada.').digest('hex'))
    expect(renderPrompt(a)).toBe('Hello Ada.')
  })

  it('an assembly edited after rendering renders anew', () => {
    const a = assembly({ sections: [section('a', 'one')] })
    expect(renderPrompt(a)).toBe('one')
    a.sections[0] = section('a', 'two')
    expect(renderPrompt(a)).toBe('two')
  })
})
