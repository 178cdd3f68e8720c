import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/llm-anthropic',
    include: ['tests/**/*.test.ts'],
  },
})
