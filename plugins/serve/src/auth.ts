// Bearer-token authentication: where the token comes from (a variable or a
// file), and the check of a request's Authorization header in constant time.
import { createHash, timingSafeEqual } from 'node:crypto'
import { readFileSync } from 'node:fs'

/** The variable `loom serve` reads its token from. */
export const TOKEN_VARIABLE = 'LOOM_SERVE_TOKEN'

/** Shorter tokens are refused: a guessable token is no authentication. */
export const MIN_TOKEN_LENGTH = 16

/** A token that cannot be used, with where it came from. */
export class TokenError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'TokenError'
  }
}

/**
 * The bearer token: the file's content when a file is given (trailing line
 * breaks dropped), else the variable. Missing, empty or short is a TokenError
 * naming the source; the token itself is never part of a message.
 */
export function loadToken(source: { file?: string; env?: NodeJS.ProcessEnv }): string {
  const env = source.env ?? process.env
  let token: string
  let from: string
  if (source.file !== undefined) {
    from = `the token file ${source.file}`
    try {
      token = readFileSync(source.file, 'utf8').replace(/[\r\n]+$/, '')
    } catch (error) {
      throw new TokenError(`cannot read ${from}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`)
    }
  } else {
    from = `$${TOKEN_VARIABLE}`
    const value = env[TOKEN_VARIABLE]
    if (value === undefined) throw new TokenError(`no bearer token: set ${TOKEN_VARIABLE} or pass --token-file FILE (every request must carry it)`)
    token = value
  }
  if (!token.trim()) throw new TokenError(`${from} is empty`)
  if (/\s/.test(token)) throw new TokenError(`${from} holds whitespace inside the token; a bearer token is one word`)
  if (token.length < MIN_TOKEN_LENGTH)
    throw new TokenError(`${from} is ${token.length} characters long; use at least ${MIN_TOKEN_LENGTH} (e.g. openssl rand -hex 32)`)
  return token
}

const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest()

/** A checker of `Authorization: Bearer <token>` headers; comparing digests keeps the time independent of where, and whether, they differ. */
export function bearerCheck(token: string): (header: string | undefined) => boolean {
  const expected = digest(token)
  return header => {
    const match = /^Bearer +(\S+) *$/i.exec(header ?? '')
    // A missing header still costs one digest, like a wrong one.
    return timingSafeEqual(digest(match?.[1] ?? ''), expected) && match !== null
  }
}
