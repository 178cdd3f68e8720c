import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/llm-scripted',
    include: ['tests/**/*.test.ts'],
  },
})
