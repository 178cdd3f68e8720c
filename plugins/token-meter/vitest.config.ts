import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/token-meter',
    include: ['tests/**/*.test.ts'],
  },
})
