import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/context-time',
    include: ['tests/**/*.test.ts'],
  },
})
