// placeholder: replaced by the web-fetch plugin
export const name = '@loom/web-fetch'
export function apply() {}
