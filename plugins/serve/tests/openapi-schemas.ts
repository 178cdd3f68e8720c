// The schemas of the OpenAPI document, compiled by Ajv (JSON Schema 2020-12,
// the dialect of OpenAPI 3.1) in strict mode, with their `$ref`s resolved
// within the document: openapi.test.ts compiles every one, and the client's
// tests (packages/client/tests) check each answer of a real server against
// the schema of its route and status.
import { Ajv2020 } from 'ajv/dist/2020.js'

const ROOT = 'https://loom.invalid/openapi.json'

/** A JSON pointer (as a URI fragment) of the path `parts`. */
export const pointer = (...parts: string[]) => `#/${parts.map(part => encodeURIComponent(part.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/')}`

/** The value at `ref` (`#/a/b`) in `doc`, or undefined. */
export function resolve(doc: any, ref: string): any {
  return ref
    .slice(2)
    .split('/')
    .map(part => decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((value, part) => value?.[part], doc)
}

export function openApiSchemas(doc: any) {
  const ajv = new Ajv2020({ strict: true, allErrors: true })
  // The document's own fields are not schema keywords: declared, so strict mode lets the root through.
  ajv.addVocabulary(Object.keys(doc))
  ajv.addSchema({ ...doc, $id: ROOT })
  const compiled = new Map<string, ReturnType<typeof ajv.compile>>()
  const compile = (at: string) => {
    let validate = compiled.get(at)
    if (!validate) compiled.set(at, (validate = ajv.compile({ $ref: ROOT + at })))
    return validate
  }
  return {
    /** Compiles the schema at `at` (a pointer into the document); throws on a schema Ajv refuses. */
    compile,
    /** Where the document holds a schema: components, parameters, headers, request and response bodies. */
    locations(): string[] {
      const found: string[] = []
      const walk = (value: any, path: string[]) => {
        if (typeof value !== 'object' || value === null) return
        if (path.at(-1) === 'schema' || path.at(-2) === 'schemas') return void found.push(pointer(...path))
        for (const [key, child] of Object.entries(value)) walk(child, [...path, key])
      }
      walk(doc, [])
      return found
    },
    /** The errors of `body` against the schema of the `status` answer of `method template`: none when it fits. */
    check(method: string, template: string, status: number, body: unknown): string[] {
      const at = pointer('paths', template, method.toLowerCase(), 'responses', String(status))
      let response = resolve(doc, at)
      if (response === undefined) return [`the document has no ${status} answer for ${method} ${template}`]
      const responseAt = response.$ref ?? at
      response = resolve(doc, responseAt)
      if (!response.content?.['application/json']) return []
      const validate = compile(`${responseAt}/content/application~1json/schema`)
      return validate(body) ? [] : (validate.errors ?? []).map(error => `${error.instancePath || '/'} ${error.message} ${JSON.stringify(error.params)}`)
    },
    /** The document's path template of a request path (`/v1/sessions/abc` → `/v1/sessions/{id}`). */
    templateOf(pathname: string): string | undefined {
      return Object.keys(doc.paths).find(template => new RegExp(`^${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`).test(pathname))
    },
  }
}
