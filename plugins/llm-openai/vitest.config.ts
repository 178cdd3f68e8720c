import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/llm-openai',
    include: ['tests/**/*.test.ts'],
  },
})
