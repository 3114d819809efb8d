"""mail"""
