import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/llm',
    include: ['tests/**/*.test.ts'],
  },
})
