import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/context-workspace',
    include: ['tests/**/*.test.ts'],
  },
})
