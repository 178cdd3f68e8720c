export {
  DEFAULT_SECRET_PATTERNS,
  MIN_SECRET_LENGTH,
  isSecretName,
  matchesName,
  normalizeName,
  scrubEnv,
  secretValues,
  type ScrubOptions,
  type ScrubResult,
  type SecretPattern,
} from './names.ts'
export {
  REDACTED,
  createRedactor,
  hostRedactor,
  redact,
  redactDeep,
  type RedactDeepOptions,
  type RedactOptions,
  type Redactor,
} from './redact.ts'
export { hostSecretValues, registerSecret, registeredSecrets } from './registry.ts'
