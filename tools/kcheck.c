int main(void) { return 1; } /* stub: replaced by its owner */
