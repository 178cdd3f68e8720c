import { describe, expect, it } from 'vitest'
import { DEFAULT_SECRET_PATTERNS, isSecretName, normalizeName, scrubEnv, secretValues } from '../src/index.ts'

describe('isSecretName', () => {
  it('knows provider keys, tokens, secrets and passwords', () => {
    for (const name of [
      'DEEPSEEK_API_KEY',
      'OPENAI_API_KEY',
      'ANTHROPIC_API_KEY',
      'GITHUB_TOKEN',
      'GH_TOKEN',
      'NPM_TOKEN',
      'NODE_AUTH_TOKEN',
      'AWS_SECRET_ACCESS_KEY',
      'AWS_SESSION_TOKEN',
      'CLIENT_SECRET',
      'DB_PASSWORD',
      'PGPASSWORD',
      'SMTP_PASS',
      'GPG_PASSPHRASE',
      'GOOGLE_APPLICATION_CREDENTIALS',
      'STRIPE_SECRET_KEY',
      'HF_TOKEN',
      'GH_PAT',
      'GITLAB_PAT',
      'OPENAI_APIKEY',
      'npm_config__authToken',
      // object keys and headers
      'apiKey',
      'token',
      'password',
      'secret',
      'clientSecret',
      'accessToken',
      'x-api-key',
      'authorization',
      'OAuthToken',
    ])
      expect([name, isSecretName(name)]).toEqual([name, true])
  })

  it('leaves ordinary names alone', () => {
    for (const name of [
      'PATH',
      'HOME',
      'PWD',
      'OLDPWD',
      'SSH_AUTH_SOCK',
      'AWS_ACCESS_KEY_ID',
      'DEEPSEEK_BASE_URL',
      'OPENAI_MODEL',
      'TERM',
      'KEYBOARD',
      'key',
      'maxTokens',
      'tokens',
      'tokenizer',
      'TOKEN_URL',
      'PASSTHROUGH',
      'LOOM_HOME',
    ])
      expect([name, isSecretName(name)]).toEqual([name, false])
  })

  it('takes extra patterns: globs on the whole name, case-insensitive, and RegExps', () => {
    const patterns = [...DEFAULT_SECRET_PATTERNS, 'DATABASE_URL', 'mycorp_*', /^SENTRY_DSN$/]
    expect(isSecretName('DATABASE_URL', patterns)).toBe(true)
    expect(isSecretName('MYCORP_ANYTHING', patterns)).toBe(true)
    expect(isSecretName('SENTRY_DSN', patterns)).toBe(true)
    expect(isSecretName('DATABASE_URL_2', patterns)).toBe(false)
    expect(isSecretName('DATABASE_URL')).toBe(false)
  })

  it('normalizes camelCase and punctuation to UPPER_SNAKE', () => {
    expect(normalizeName('apiKey')).toBe('API_KEY')
    expect(normalizeName('x-api-key')).toBe('X_API_KEY')
    expect(normalizeName('OAuthToken')).toBe('OAUTH_TOKEN')
  })
})

describe('scrubEnv', () => {
  const env = {
    PATH: '/usr/bin',
    HOME: '/root',
    DEEPSEEK_API_KEY: 'sk-test-0123456789',
    GITHUB_TOKEN: 'ghp_0123456789',
    MY_PASSWORD: 'x',
    UNSET: undefined,
  }

  it('copies the environment without secret variables and names what it removed', () => {
    const { env: scrubbed, removed } = scrubEnv(env)
    expect(scrubbed).toEqual({ PATH: '/usr/bin', HOME: '/root' })
    expect(removed).toEqual(['DEEPSEEK_API_KEY', 'GITHUB_TOKEN', 'MY_PASSWORD'])
    expect(env.DEEPSEEK_API_KEY).toBe('sk-test-0123456789')
  })

  it('keeps allowlisted names (exact or glob)', () => {
    expect(scrubEnv(env, { allow: ['GITHUB_TOKEN'] }).env).toEqual({ PATH: '/usr/bin', HOME: '/root', GITHUB_TOKEN: 'ghp_0123456789' })
    expect(scrubEnv(env, { allow: ['*_PASSWORD'] }).removed).toEqual(['DEEPSEEK_API_KEY', 'GITHUB_TOKEN'])
  })

  it('uses the given patterns instead of the defaults', () => {
    expect(scrubEnv(env, { patterns: ['HOME'] }).removed).toEqual(['HOME'])
    expect(scrubEnv(env, { patterns: [...DEFAULT_SECRET_PATTERNS, 'HOME'] }).removed).toEqual(['DEEPSEEK_API_KEY', 'GITHUB_TOKEN', 'HOME', 'MY_PASSWORD'])
  })
})

describe('secretValues', () => {
  it('gives the values of secret variables, longest first, without duplicates or short ones', () => {
    expect(
      secretValues({
        A_TOKEN: 'tok-01234567',
        B_TOKEN: 'tok-01234567',
        OPENAI_API_KEY: 'sk-proj-0123456789abcdef',
        SHORT_SECRET: 'abc1234',
        EMPTY_TOKEN: '',
        PATH: '/usr/local/bin:/usr/bin',
      }),
    ).toEqual(['sk-proj-0123456789abcdef', 'tok-01234567'])
  })

  it('adds each line of a multi-line secret, and the password of any URL with credentials', () => {
    const pem = '-----BEGIN KEY-----\nAAAABBBBCCCCDDDD\nEEEEFFFFGGGGHHHH\n-----END KEY-----'
    const values = secretValues({ SSH_PRIVATE_KEY: pem, DATABASE_URL: 'postgres://app:pg-pass-42@db:5432/app' })
    expect(values).toContain(pem)
    expect(values).toContain('AAAABBBBCCCCDDDD')
    expect(values).toContain('EEEEFFFFGGGGHHHH')
    expect(values).toContain('pg-pass-42')
    expect(values).not.toContain('postgres://app:pg-pass-42@db:5432/app')
  })

  it('takes patterns', () => {
    expect(secretValues({ DATABASE_URL: 'sqlite:///tmp/x.db' }, ['DATABASE_URL'])).toEqual(['sqlite:///tmp/x.db'])
  })
})
