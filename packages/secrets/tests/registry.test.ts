import { describe, expect, it } from 'vitest'
import { REDACTED, createRedactor, hostRedactor, hostSecretValues, registerSecret, registeredSecrets } from '../src/index.ts'

const TOKEN = 'file-token-0123456789abcdef'

describe('registerSecret', () => {
  it('a value read from a file is redacted like an environment secret, until its registration is removed', () => {
    const env = { PATH: '/usr/bin' }
    expect(hostRedactor({ env })).toBeUndefined()
    const remove = registerSecret(`${TOKEN}\n`)
    try {
      // The file's final newline is not part of the secret.
      expect(registeredSecrets()).toEqual([TOKEN])
      expect(hostRedactor({ env, contextual: false })!(`cat token.txt\n${TOKEN}\n`)).toBe(`cat token.txt\n${REDACTED}\n`)
      expect(hostSecretValues({ env: { ...env, GITHUB_TOKEN: 'ghp_env-value-0123' } })).toEqual([TOKEN, 'ghp_env-value-0123'])
    } finally {
      remove()
    }
    expect(registeredSecrets()).toEqual([])
    expect(hostRedactor({ env })).toBeUndefined()
  })

  it('a multi-line value (a PEM key) is redacted whole and line by line; short lines and values are left out', () => {
    const pem = '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nend\n-----END PRIVATE KEY-----\n'
    const remove = registerSecret(pem)
    const short = registerSecret('abc123')
    try {
      expect(registeredSecrets()).toEqual([pem.trim(), 'MIIEvQIBADANBgkqhkiG9w0BAQEFAASC', '-----BEGIN PRIVATE KEY-----', '-----END PRIVATE KEY-----'])
      expect(hostRedactor({ env: {} })!('line 2: MIIEvQIBADANBgkqhkiG9w0BAQEFAASC')).toBe(`line 2: ${REDACTED}`)
    } finally {
      remove()
      short()
    }
  })

  it('a value registered twice stays until both registrations are removed; removing twice is harmless', () => {
    const first = registerSecret(TOKEN)
    const second = registerSecret(TOKEN)
    first()
    first()
    expect(registeredSecrets()).toEqual([TOKEN])
    second()
    expect(registeredSecrets()).toEqual([])
    expect(() => registerSecret(undefined as never)).toThrow('registerSecret() takes a string, got undefined')
  })
})

describe('credentials recognized by their shape', () => {
  const GH = `ghp_${'A1b2C3d4E5'.repeat(3)}a1b2c3`
  it('are redacted in every pass, file contents included: a GH_PAT line in a dotfile, a private key copied anywhere', () => {
    const redactor = createRedactor([], { contextual: false })
    expect(redactor(`export GH_PAT=${GH}\nexport EDITOR=vi\n`)).toBe(`export GH_PAT=${REDACTED}\nexport EDITOR=vi\n`)
    expect(redactor(`token: github_pat_${'x1'.repeat(20)}, gitlab: glpat-${'y2'.repeat(10)}`)).toBe(`token: ${REDACTED}, gitlab: ${REDACTED}`)
    const key = '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nAAAAEbm9uZQ==\n-----END OPENSSH PRIVATE KEY-----\n'
    expect(redactor(`cat id:\n${key}done`)).toBe(`cat id:\n-----BEGIN OPENSSH PRIVATE KEY-----${REDACTED}-----END OPENSSH PRIVATE KEY-----\ndone`)
    // Cut before its end line: the rest of the text is the key's.
    expect(redactor('-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA')).toBe(`-----BEGIN RSA PRIVATE KEY-----${REDACTED}`)
  })

  it('leave look-alikes alone: short prefixed words, public keys, code naming them', () => {
    const redactor = createRedactor([], { contextual: false })
    for (const text of [
      'ghp_short',
      'const ghp_prefix = "ghp_"',
      '-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE\n-----END PUBLIC KEY-----',
      'npm_config_cache=/tmp/x',
    ]) {
      expect(redactor(text)).toBe(text)
    }
  })
})
