import streamlit as st

st.title("Overrides")
st.info("Coming soon.")
