// defineTool: definition checks, compiled validators, what the model reads for bad arguments.
import { describe, expect, it } from 'vitest'
import { defineTool, describeViolations } from '@loom/tools'
import { host, OBJECT, text } from './helpers.ts'

const base = { description: 'd', parameters: { ...OBJECT }, execute: () => 'ok' }

describe('defineTool', () => {
  it.each(['a', 'A-b_9', 'x'.repeat(64)])('accepts the name %j', name => {
    expect(defineTool({ ...base, name }).name).toBe(name)
  })

  it.each(['', 'has space', 'x'.repeat(65), 'dot.ted', 'ünï', undefined, 42])('rejects the name %j', name => {
    expect(() => defineTool({ ...base, name: name as string })).toThrow(TypeError)
    expect(() => defineTool({ ...base, name: name as string })).toThrow(/invalid tool name .*\/\^\[a-zA-Z0-9_-\]\{1,64\}\$\//)
  })

  it.each([
    ['parameters missing', { parameters: undefined }, /parameters must be a JSON schema object/],
    ['a non-object schema', { parameters: { type: 'string' } }, /must be an object schema .*got type "string"/],
    ['a schema without type', { parameters: { properties: {} } }, /must be an object schema/],
    ['a malformed schema', { parameters: { type: 'object', properties: { a: { type: 'strin' } } } }, /not a valid JSON schema: .*type/],
    [
      'a malformed 2020-12 schema',
      { parameters: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', required: 'a' } },
      /not a valid JSON schema: parameters\/required must be array$/,
    ],
    [
      'a $schema it does not check against',
      { parameters: { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' } },
      /parameters.\$schema must name draft-07 \(the default\) or 2020-12, got "http:\/\/json-schema.org\/draft-04\/schema#"$/,
    ],
    ['a schema with a function', { parameters: { type: 'object', default: () => 1 } }, /plain JSON \(found a value of type function at \/default\)/],
    ['an empty description', { description: ' ' }, /description must be a non-empty string/],
    ['no execute', { execute: undefined }, /execute must be a function/],
    ['a bad isConcurrencySafe', { isConcurrencySafe: 'yes' }, /isConcurrencySafe must be a boolean or a function/],
    ['a zero timeout', { timeoutMs: 0 }, /timeoutMs must be a positive number/],
    ['a NaN timeout', { timeoutMs: Number.NaN }, /timeoutMs must be a positive number/],
    ['an infinite timeout', { timeoutMs: Infinity }, /timeoutMs must be a positive number/],
  ])('rejects %s, naming the tool', (_label, patch, message) => {
    const attempt = () => defineTool({ ...base, name: 'probe', ...patch } as never)
    expect(attempt).toThrow(TypeError)
    expect(attempt).toThrow(/invalid tool definition "probe": /)
    expect(attempt).toThrow(message)
  })

  it("returns a frozen definition whose schema is detached from the author's object", () => {
    const parameters = { type: 'object', properties: { a: { type: 'string' } } }
    const def = defineTool({ ...base, name: 'detached', parameters })
    parameters.properties.a.type = 'number'
    expect(Object.isFrozen(def)).toBe(true)
    expect(Object.isFrozen(def.parameters)).toBe(true)
    expect(def.parameters).toEqual({ type: 'object', properties: { a: { type: 'string' } } })
  })

  it('the same $id can be defined again (a hot-reloaded tool), and both validate', async () => {
    const parameters = { $id: 'https://example.com/args', type: 'object', properties: { a: { type: 'string' } } }
    const h = await host()
    h.ctx.tools.register(defineTool({ ...base, name: 'first', parameters }))
    h.ctx.tools.register(defineTool({ ...base, name: 'second', parameters }))
    for (const name of ['first', 'second']) {
      expect(text(await h.run(name, { a: 'x' }))).toBe('ok')
      expect(text(await h.run(name, { a: 1 }))).toBe(`Error: invalid arguments for tool "${name}": /a must be string`)
    }
  })

  it('a schema the meta-schema accepts but that cannot compile defines; each call is refused saying why', async () => {
    const h = await host()
    h.ctx.tools.register(defineTool({ ...base, name: 'unresolved', parameters: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } } }))
    expect(text(await h.run('unresolved', { a: 1 }))).toMatch(
      /^Error: invalid arguments for tool "unresolved": the tool's parameters are not a valid JSON schema: can't resolve reference #\/\$defs\/missing/,
    )
  })

  it.each(['http://json-schema.org/draft-07/schema#', 'http://json-schema.org/draft-07/schema'])('accepts a schema that names draft-07 as %s', $schema => {
    expect(defineTool({ ...base, name: 'named', parameters: { $schema, type: 'object' } }).parameters.$schema).toBe($schema)
    expect(() => defineTool({ ...base, name: 'named', parameters: { $schema, type: 'object', required: 'a' } })).toThrow(
      /not a valid JSON schema: parameters\/required must be array$/,
    )
  })

  it('accepts draft 2020-12 schemas', async () => {
    const h = await host()
    h.ctx.tools.register(
      defineTool({
        ...base,
        name: 'modern',
        parameters: {
          $schema: 'https://json-schema.org/draft/2020-12/schema',
          type: 'object',
          properties: { list: { type: 'array', prefixItems: [{ type: 'string' }] } },
        },
      }),
    )
    expect((await h.run('modern', { list: ['a'] })).isError).toBe(false)
    expect(text(await h.run('modern', { list: [1] }))).toBe('Error: invalid arguments for tool "modern": /list/0 must be string')
  })

  it("the body is called on the author's object with typed arguments", async () => {
    const h = await host()
    const spec = {
      ...base,
      name: 'typed',
      parameters: { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] },
      prefix: 'n=',
      execute(this: { prefix: string }, args: { n: number }) {
        return `${this.prefix}${args.n + 1}`
      },
    }
    h.ctx.tools.register(defineTool<{ n: number }>(spec))
    expect(text(await h.run('typed', { n: 1 }))).toBe('n=2')
  })
})

describe('argument violations as the model reads them', () => {
  const edit = defineTool({
    name: 'edit',
    description: 'Edits a file.',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string' }, command: { type: 'string' }, mode: { enum: ['a', 'b'] } },
      required: ['command'],
      additionalProperties: false,
    },
    execute: () => 'edited',
  })

  it('lists every violation with its JSON pointer', async () => {
    const h = await host()
    h.ctx.tools.register(edit)
    const result = await h.run('edit', { path: 1 })
    expect(result).toEqual({
      isError: true,
      error: {
        message: 'invalid arguments for tool "edit": must have required property \'command\'; /path must be string',
        info: { name: 'ToolArgsError', code: 'INVALID_ARGS' },
      },
      content: [{ type: 'text', text: 'Error: invalid arguments for tool "edit": must have required property \'command\'; /path must be string' }],
    })
  })

  it('names unexpected properties and the allowed values', async () => {
    const h = await host()
    h.ctx.tools.register(edit)
    expect(text(await h.run('edit', { command: 'x', extra: 1, mode: 'c' }))).toBe(
      'Error: invalid arguments for tool "edit": must NOT have additional properties ("extra"); /mode must be equal to one of the allowed values ("a", "b")',
    )
  })

  it('arguments that are not an object', async () => {
    const h = await host()
    h.ctx.tools.register(edit)
    expect(text(await h.run('edit', [1]))).toBe('Error: invalid arguments for tool "edit": must be object')
  })

  it('caps long lists', () => {
    const errors = Array.from({ length: 12 }, (_, i) => ({ instancePath: `/${i}`, message: 'must be string', keyword: 'type', params: {}, schemaPath: '' }))
    expect(describeViolations(errors)).toBe(
      `${errors
        .slice(0, 8)
        .map(e => `${e.instancePath} must be string`)
        .join('; ')}; and 4 more`,
    )
  })
})
