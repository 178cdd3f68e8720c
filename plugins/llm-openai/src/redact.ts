/** Removes this call's key, and any bearer token a server echoes back, from error text. */
export function redactCredential(text: string, apiKey: string): string {
  const withoutKey = apiKey ? text.split(apiKey).join('[REDACTED]') : text
  return withoutKey.replace(/(bearer\s+)[^\s"',;]+/gi, '$1[REDACTED]')
}
