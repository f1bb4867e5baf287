int foo(void)
{
    return 2;
}
