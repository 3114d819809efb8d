"""store/migrations"""
