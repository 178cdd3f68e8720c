import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/agent-loop',
    include: ['tests/**/*.test.ts'],
  },
})
