import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/agent-instructions',
    include: ['tests/**/*.test.ts'],
  },
})
