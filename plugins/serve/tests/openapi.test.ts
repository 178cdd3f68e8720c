// The OpenAPI document against the API it describes: its paths and methods are
// exactly the routes api.ts serves (read from the router itself, so neither
// can change alone), it is structurally valid OpenAPI 3.1 (the fields the
// specification requires, path parameters, resolvable `$ref`s, schemas Ajv
// compiles as JSON Schema 2020-12), and a server answers it at
// /v1/openapi.json, behind the token. Real answers are checked against its
// schemas by the client's tests (packages/client/tests).
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApi } from '../src/api.ts'
import { createHttpServer } from '../src/http.ts'
import { OPENAPI } from '../src/openapi.ts'
import type { HostedSessions } from '../src/sessions.ts'
import { openApiSchemas, pointer, resolve } from './openapi-schemas.ts'

const TOKEN = 'openapi-test-token-0123456789'
const doc = OPENAPI as any
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace']

// Neither the route list nor the document touches a session.
const api = () =>
  createApi({} as HostedSessions, { token: TOKEN, maxBodyBytes: 1 << 20, heartbeatMs: 15_000, retryMs: 1000, store: 'memory', report: () => {} })

/** Every operation of the document: `METHOD /path/{param}` with its object. */
const operations = () =>
  Object.entries(doc.paths as Record<string, any>).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, operation]) => ({ method: method.toUpperCase(), path, operation: operation as any })),
  )

describe('the OpenAPI document', () => {
  it('describes exactly the routes api.ts serves, no more, no fewer', () => {
    const served = api().routes.map(route => `${route.method} ${route.path.replace(/:(\w+)/g, '{$1}')}`)
    const documented = operations().map(({ method, path }) => `${method} ${path}`)
    expect(served.length).toBeGreaterThan(0)
    expect([...documented].sort()).toEqual([...served].sort())
  })

  it('is OpenAPI 3.1 with what the specification requires', () => {
    expect(doc.openapi).toMatch(/^3\.1\.\d+$/)
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String) })
    expect(doc.info.license.identifier === undefined || doc.info.license.url === undefined).toBe(true)
    const schemes = Object.keys(doc.components.securitySchemes)
    const ids = new Set<string>()
    for (const requirement of doc.security) for (const name of Object.keys(requirement)) expect(schemes).toContain(name)
    for (const { method, path, operation } of operations()) {
      const where = `${method} ${path}`
      expect(path, where).toMatch(/^\//)
      expect(ids.has(operation.operationId), `${where}: operationId ${operation.operationId} is used twice`).toBe(false)
      ids.add(operation.operationId)
      for (const requirement of operation.security ?? []) for (const name of Object.keys(requirement)) expect(schemes, where).toContain(name)

      const responses = Object.entries(operation.responses as Record<string, any>)
      expect(responses.length, where).toBeGreaterThan(0)
      for (const [status, response] of responses) {
        expect(status, where).toMatch(/^([1-5](\d\d|XX)|default)$/)
        expect((response.$ref ? resolve(doc, response.$ref) : response).description, `${where} ${status}`).toEqual(expect.any(String))
      }

      // Each `{name}` of the path is a required path parameter, and each path parameter is in the path.
      const parameters = (operation.parameters ?? []).map((parameter: any) => (parameter.$ref ? resolve(doc, parameter.$ref) : parameter))
      for (const parameter of parameters) {
        expect(parameter, where).toMatchObject({ name: expect.any(String), in: expect.stringMatching(/^(query|header|path|cookie)$/) })
        expect(parameter.schema ?? parameter.content, `${where} ${parameter.name}`).toBeDefined()
      }
      const inPath = [...path.matchAll(/\{(\w+)\}/g)].map(match => match[1])
      const declared = parameters.filter((parameter: any) => parameter.in === 'path')
      expect(declared.map((parameter: any) => parameter.name).sort(), where).toEqual([...inPath].sort())
      for (const parameter of declared) expect(parameter.required, `${where} ${parameter.name}`).toBe(true)
      if (operation.requestBody) expect(Object.keys(operation.requestBody.content).length, where).toBeGreaterThan(0)
    }
  })

  it('every $ref resolves, and every schema compiles as JSON Schema 2020-12 in strict mode', () => {
    const refs: string[] = []
    const walk = (value: unknown) => {
      if (typeof value !== 'object' || value === null) return
      for (const [key, child] of Object.entries(value)) key === '$ref' ? refs.push(child as string) : walk(child)
    }
    walk(doc)
    expect(refs.length).toBeGreaterThan(10)
    for (const ref of refs) expect(resolve(doc, ref), ref).toBeDefined()

    const schemas = openApiSchemas(doc)
    const locations = schemas.locations()
    expect(locations).toContain(pointer('components', 'schemas', 'Error'))
    for (const at of locations) expect(() => schemas.compile(at), at).not.toThrow()
    // The schemas say something: a made-up answer is refused, a real-shaped one accepted.
    expect(schemas.check('POST', '/v1/sessions/{id}/messages', 202, { id: 'x', seq: 3, status: 'idle', mode: 'followup' })).toEqual([])
    expect(schemas.check('POST', '/v1/sessions/{id}/messages', 202, { id: 'x', seq: -1, status: 'asleep' })).not.toEqual([])
    expect(schemas.check('POST', '/v1/sessions', 401, { error: { code: 'UNAUTHORIZED', message: 'no' } })).toEqual([])
  })
})

describe('GET /v1/openapi.json', () => {
  const server = createHttpServer(api(), { headersTimeoutMs: 10_000, requestTimeoutMs: 30_000, maxConnections: 100 })
  let base: string
  beforeAll(async () => {
    await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    await new Promise(resolve => server.close(resolve))
  })

  it('answers the document with the token, and 401 without it, like every route but the probes', async () => {
    const served = await fetch(`${base}/v1/openapi.json`, { headers: { authorization: `Bearer ${TOKEN}` } })
    expect(served.status).toBe(200)
    expect(served.headers.get('content-type')).toBe('application/json; charset=utf-8')
    expect(await served.json()).toEqual(OPENAPI)
    const refused = await fetch(`${base}/v1/openapi.json`)
    expect(refused.status).toBe(401)
    expect(openApiSchemas(doc).check('GET', '/v1/openapi.json', 401, await refused.json())).toEqual([])
  })
})
