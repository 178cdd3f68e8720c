import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/session',
    include: ['tests/**/*.test.ts'],
  },
})
