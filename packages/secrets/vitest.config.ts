import { defineProject } from 'vitest/config'

export default defineProject({
  test: {
    name: '@loom/secrets',
    include: ['tests/**/*.test.ts'],
  },
})
